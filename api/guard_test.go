package api

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestGuardRefusesCrossSiteAndRebound sends every state-changing route of
// the router, taken from the router itself so that a new one is covered,
// the requests a page of another site can make a browser send, and the
// requests of the CLI and of curl, which must pass.
func TestGuardRefusesCrossSiteAndRebound(t *testing.T) {
	_, routes := newRouter(Options{Agent: newAgent()})
	var posts []route
	for _, r := range routes {
		if r.guarded {
			posts = append(posts, r)
		} else if !strings.HasPrefix(r.pattern, "GET ") {
			t.Errorf("route %q is not a GET and not guarded", r.pattern)
		}
	}
	if len(posts) < 7 { // 5 API endpoints and the page's 2 buttons, at least
		t.Fatalf("only %d guarded routes: %v", len(posts), posts)
	}

	type variant struct {
		name    string
		token   string // the agent's api_token
		remote  string
		headers map[string]string
		auth    string
		ok      bool // passes the guard (the handler answers, whatever it answers)
	}
	loop, host := "127.0.0.1:40000", "127.0.0.1:8790"
	variants := []variant{
		// Refused.
		{name: "cross-site form, text/plain", remote: loop, headers: map[string]string{"Host": host,
			"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}},
		{name: "foreign Origin only (older browser)", remote: loop, headers: map[string]string{"Host": host,
			"Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"}},
		{name: "Sec-Fetch-Site cross-site, no Origin", remote: loop, headers: map[string]string{"Host": host, "Sec-Fetch-Site": "cross-site"}},
		{name: "Sec-Fetch-Site same-site (another port or subdomain)", remote: loop, headers: map[string]string{"Host": host, "Sec-Fetch-Site": "same-site"}},
		{name: "DNS rebinding: same-origin for the browser, foreign Host", remote: loop, headers: map[string]string{
			"Host": "rebind.evil.example:8790", "Origin": "http://rebind.evil.example:8790", "Sec-Fetch-Site": "same-origin"}},
		{name: "DNS rebinding without browser headers", remote: loop, headers: map[string]string{"Host": "rebind.evil.example:8790"}},
		{name: "no Host at all (HTTP/1.0)", remote: loop, headers: map[string]string{"Host": ""}},
		{name: "non-loopback client without a token", remote: "10.1.2.3:5000", headers: map[string]string{"Host": host}},
		{name: "with a token, cross-site even with the token", token: "t0k", remote: loop, auth: "Bearer t0k",
			headers: map[string]string{"Host": host, "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}},
		{name: "with a token, loopback same-origin but no token", token: "t0k", remote: loop,
			headers: map[string]string{"Host": host}},
		// Admitted.
		{name: "curl from loopback, no Origin", remote: loop, headers: map[string]string{"Host": host}, ok: true},
		{name: "curl at localhost", remote: "[::1]:40000", headers: map[string]string{"Host": "localhost:8790"}, ok: true},
		{name: "with a token, from anywhere under any name", token: "t0k", remote: "10.1.2.3:5000", auth: "Bearer t0k",
			headers: map[string]string{"Host": "electd.example:8790"}, ok: true},
	}
	for _, r := range posts {
		method, path, _ := strings.Cut(r.pattern, " ")
		path = strings.ReplaceAll(path, "{job}", "billing")
		for _, v := range variants {
			t.Run(r.pattern+"/"+v.name, func(t *testing.T) {
				h, _ := newRouter(Options{Agent: newAgent(), Token: v.token})
				var req *http.Request
				if r.door == formDoor {
					form := url.Values{"job": {"billing"}, "drain": {"on"}, "token": {v.token}}
					if v.token == "" {
						form.Set("form_key", formKeyOf(t, h))
					} else if v.auth == "" {
						form.Del("token")
					}
					req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				} else {
					req = httptest.NewRequest(method, path, nil)
					if v.auth != "" {
						req.Header.Set("Authorization", v.auth)
					}
				}
				req.RemoteAddr = v.remote
				for k, val := range v.headers {
					if k == "Host" {
						req.Host = val
					} else if !(r.door == formDoor && k == "Content-Type") {
						req.Header.Set(k, val)
					}
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				refused := rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized || rec.Code == http.StatusUnsupportedMediaType
				if refused == v.ok {
					t.Errorf("%s %s: %d %s", method, path, rec.Code, rec.Body)
				}
			})
		}
	}
}

// TestGuardJSONContentTypes: without a token, a JSON endpoint takes a body
// as application/json only; the types a page may send without a preflight
// are refused, and the refusal does nothing.
func TestGuardJSONContentTypes(t *testing.T) {
	for _, tc := range []struct {
		ct   string
		want int
	}{
		{"", http.StatusOK},
		{"application/json", http.StatusOK},
		{"application/json; charset=utf-8", http.StatusOK},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"text/plain;charset=UTF-8", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"multipart/form-data; boundary=x", http.StatusUnsupportedMediaType},
		{"nonsense/", http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.ct, func(t *testing.T) {
			a := newAgent()
			h := Handler(Options{Agent: a})
			req := httptest.NewRequest("POST", "/v1/drain", nil)
			req.Host, req.RemoteAddr = "127.0.0.1:8790", "127.0.0.1:40000"
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want || a.Info().Draining != (tc.want == http.StatusOK) {
				t.Errorf("Content-Type %q: %d (draining %v) %s, want %d", tc.ct, rec.Code, a.Info().Draining, rec.Body, tc.want)
			}
		})
	}
	// With a token, the token decides.
	a := newAgent()
	req := httptest.NewRequest("POST", "/v1/drain", strings.NewReader("x=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer t0k")
	rec := httptest.NewRecorder()
	Handler(Options{Agent: a, Token: "t0k"}).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !a.Info().Draining {
		t.Errorf("with the token: %d %s", rec.Code, rec.Body)
	}
}

func formKeyOf(t *testing.T, h http.Handler) string {
	t.Helper()
	req := httptest.NewRequest("GET", "/ui", nil)
	req.Host, req.RemoteAddr = "127.0.0.1:8790", "127.0.0.1:40000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	m := regexp.MustCompile(`name="form_key" value="([^"]+)"`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("no form_key on the page: %s", rec.Body)
	}
	return m[1]
}
