package sio

import "testing"

func TestParsePacket(t *testing.T) {
	t.Parallel()
	p, err := parsePacket(`2/oan,["oan:event",{"a":1}]`)
	if err != nil || p.typ != '2' || p.ns != "/oan" || p.data != `["oan:event",{"a":1}]` {
		t.Fatalf("%+v %v", p, err)
	}
	p, err = parsePacket(`2/oan,12["x"]`)
	if err != nil || p.data != `["x"]` {
		t.Fatalf("ack id: %+v %v", p, err)
	}
	p, err = parsePacket(`1/oan,`)
	if err != nil || p.typ != '1' || p.ns != "/oan" {
		t.Fatalf("disconnect: %+v %v", p, err)
	}
	p, err = parsePacket(`0{"sid":"x"}`)
	if err != nil || p.ns != "/" {
		t.Fatalf("default namespace: %+v %v", p, err)
	}
	for _, bad := range []string{"", "9", "x", "5/oan,"} {
		if _, err := parsePacket(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
