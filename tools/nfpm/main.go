// Command nfpm builds electd's .deb and .rpm from one description
// (dist/nfpm.yaml) with goreleaser's nfpm, used as a library: only its deb
// and rpm packagers are compiled in, and its dependencies stay in this
// module, out of electd's. scripts/package.sh stages the files and runs it:
//
//	go run . -f ../../dist/nfpm.yaml -p deb -t DIR
//
// prints the path of the package it wrote in DIR (nfpm's conventional name:
// electd_0.9.0-1_amd64.deb, electd-0.9.0-1.x86_64.rpm). The ${NAME}s of the
// description are taken from the environment.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the packager "deb"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the packager "rpm"
)

func main() {
	config := flag.String("f", "nfpm.yaml", "the package description")
	packager := flag.String("p", "", "the packager: deb or rpm")
	target := flag.String("t", ".", "the directory the package is written to")
	flag.Parse()
	path, err := build(*config, *packager, *target)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nfpm: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

func build(config, packager, target string) (string, error) {
	cfg, err := nfpm.ParseFileWithEnvMapping(config, os.Getenv)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", config, err)
	}
	info, err := cfg.Get(packager)
	if err != nil {
		return "", fmt.Errorf("%s settings of %s: %w", packager, config, err)
	}
	info = nfpm.WithDefaults(info)
	pkg, err := nfpm.Get(packager)
	if err != nil {
		return "", err
	}
	path := filepath.Join(target, pkg.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info.Target = path
	if err := pkg.Package(info, f); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("build the %s: %w", packager, err)
	}
	return path, f.Close()
}
