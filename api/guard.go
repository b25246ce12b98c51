package api

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
)

// The guard: one check for every request that changes something, through
// the JSON API and the status page's forms alike. A browser sends a request
// for any page it shows, to any address, carrying what it has; so an API on
// loopback with no token is only as safe as its refusal of what a page of
// another site can make a browser send:
//
//   - a request another site's page sent: the browser says so in
//     Sec-Fetch-Site, or in an Origin that is not the request's Host
//     (http.CrossOriginProtection);
//   - a name of that site that resolves to 127.0.0.1 (DNS rebinding): the
//     request is then "same-origin" for the browser, but its Host is the
//     site's name, not a loopback one;
//   - a JSON endpoint sent a form or text/plain: the content types a page
//     may send without asking the server first (a "simple request").
//
// With an api_token, the token decides (a browser never adds it by itself),
// and the cross-site check still applies: no page of another site has a
// reason to call the API.

// door is how a state-changing request reaches the agent, and so where its
// credentials are: an Authorization header for the JSON API, form fields for
// the status page's buttons.
type door int

const (
	jsonDoor door = iota // POST /v1/...: bearer token, JSON body or none
	formDoor             // POST /ui/...: token or form_key as form fields
)

// refusal is why the guard refused a request, worded for each door.
type refusal struct {
	status  int
	api, ui string
	bearer  bool // 401 with WWW-Authenticate: Bearer
}

// uiFormMax bounds a form's body: a token and a job name.
const uiFormMax = 16 << 10

// guard holds what the check needs: the token, and for the status page
// the per-agent form key (a page of another site cannot read it, so cannot
// make a loopback browser post a form that carries it).
type guard struct {
	token   string
	formKey string
	cop     *http.CrossOriginProtection
}

// check admits r or says why not. For the form door it parses the form
// (bounded), which the handler then reads from r.PostForm.
func (g *guard) check(w http.ResponseWriter, r *http.Request, d door) *refusal {
	if err := g.cop.Check(r); err != nil {
		return &refusal{status: http.StatusForbidden,
			api: "refused: the request was sent by a page of another site (Sec-Fetch-Site or Origin)",
			ui:  "Refused: the form was sent from another site."}
	}
	if d == formDoor {
		r.Body = http.MaxBytesReader(w, r.Body, uiFormMax)
		if err := r.ParseForm(); err != nil {
			return &refusal{status: http.StatusBadRequest, ui: "Refused: the form could not be read."}
		}
	}
	if g.token != "" {
		var got string
		if d == formDoor {
			got = r.PostForm.Get("token")
		} else {
			got, _ = bearerToken(r.Header.Get("Authorization"))
		}
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(g.token)) != 1 {
			return &refusal{status: http.StatusUnauthorized, bearer: d == jsonDoor,
				api: "missing or wrong bearer token",
				ui:  "Refused: missing or wrong API token (the agent's api_token)."}
		}
		return nil
	}
	switch {
	case !loopbackRemote(r.RemoteAddr):
		return &refusal{status: http.StatusForbidden,
			api: "no api_token is configured: only loopback clients may call this",
			ui:  "Refused: no api_token is configured, so only loopback clients may use these buttons."}
	case !loopbackHost(r.Host):
		return &refusal{status: http.StatusForbidden,
			api: fmt.Sprintf("no api_token is configured: the request must be addressed to a loopback address (127.0.0.1, [::1] or localhost), not %q", r.Host),
			ui:  "Refused: open the page at a loopback address (127.0.0.1, [::1] or localhost) to use its buttons."}
	}
	if d == formDoor {
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("form_key")), []byte(g.formKey)) != 1 {
			return &refusal{status: http.StatusForbidden,
				ui: "Refused: the form did not come from this agent's page (or the agent restarted since it was loaded): reload the page and try again."}
		}
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &refusal{status: http.StatusUnsupportedMediaType,
				api: fmt.Sprintf("no api_token is configured: a request with a body must send it as Content-Type: application/json, not %q", ct)}
		}
	}
	return nil
}

// loopbackRemote says whether a client's address is on this machine's
// loopback interface.
func loopbackRemote(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHost says whether a request's Host names this machine's loopback
// interface: a page loaded through another name that resolves to 127.0.0.1
// (DNS rebinding) belongs to that name's site.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme. Clients and proxies spell the scheme in any case and may pad it,
// both of which RFC 7235 §2.1 allows: the scheme is case-insensitive and
// 1*SP separates it from the credentials.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

// route is one pattern of the API's mux and the door of a state-changing
// one.
type route struct {
	pattern string
	door    door
	guarded bool
}

// router registers the API's routes. Every pattern names its method, and
// every method but GET (and the HEAD it implies) is guarded: a new
// state-changing endpoint cannot be added without the guard.
type router struct {
	mux    *http.ServeMux
	g      *guard
	s      *server
	ui     *ui
	routes []route
}

func (rt *router) handle(pattern string, d door, h http.HandlerFunc) {
	method, _, ok := strings.Cut(pattern, " ")
	if !ok || strings.HasPrefix(method, "/") {
		panic("api: a route without a method: " + pattern)
	}
	guarded := method != http.MethodGet
	rt.routes = append(rt.routes, route{pattern, d, guarded})
	if !guarded {
		rt.mux.HandleFunc(pattern, h)
		return
	}
	rt.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		no := rt.g.check(w, r, d)
		if no == nil {
			h(w, r)
			return
		}
		if d == formDoor {
			rt.ui.refuse(w, r, no.status, no.ui)
			return
		}
		if no.bearer {
			w.Header().Set("WWW-Authenticate", `Bearer realm="electd"`)
		}
		rt.s.writeError(w, no.status, no.api)
	})
}

func (rt *router) route(pattern string, h http.HandlerFunc) { rt.handle(pattern, jsonDoor, h) }
