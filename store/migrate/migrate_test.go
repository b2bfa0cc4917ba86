package migrate

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestCollectOrdersAcrossSetsAndRefusesDuplicates(t *testing.T) {
	a := Set{Owner: "a", FS: fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte(`A1`)},
		"migrations/0003_a.sql": {Data: []byte(`A3`)},
		"migrations/README":     {Data: []byte(`not a migration`)},
	}}
	b := Set{Owner: "b", FS: fstest.MapFS{
		"migrations/0002_b.sql": {Data: []byte(`B2`)},
	}}
	all, err := Collect("test", b, a)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range all {
		names = append(names, m.Name+"@"+m.Owner)
	}
	if got, want := strings.Join(names, " "), "migrations/0001_a.sql@a migrations/0002_b.sql@b migrations/0003_a.sql@a"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	if body, err := all[1].Body(); err != nil || body != "B2" {
		t.Errorf("body %q, %v", body, err)
	}
	if _, err := Collect("test", a, Set{Owner: "c", FS: fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte(`SELECT 1;`)},
	}}); err == nil || !strings.Contains(err.Error(), "test: migration migrations/0001_a.sql is in both a and c") {
		t.Errorf("a name in two sets: %v", err)
	}
	if _, err := Collect("test", Set{Owner: "empty"}); err == nil {
		t.Error("a set without files was accepted")
	}
}
