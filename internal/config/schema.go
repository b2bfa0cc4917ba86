package config

import (
	"reflect"
	"strings"
)

// Schema returns a JSON Schema (draft 2020-12) of the config file as the
// loader reads it: the tables and keys of Config (from its toml tags) and,
// under [[agents]], each bridge section of sections, decoded by the
// bridge's own type. It is generated from the types, so a key added in
// code is in the schema; unknown keys are refused, as the loader refuses
// them. Value checks the loader makes beyond types (ranges, formats,
// cross-key rules) are not in it: `agentgw doctor` makes them.
func Schema(sections Sections) map[string]any {
	root := structSchema(reflect.TypeOf(Config{}))
	props := root["properties"].(map[string]any)
	agent := structSchema(reflect.TypeOf(Agent{}))
	aprops := agent["properties"].(map[string]any)
	var names []string
	if sections != nil {
		names = sections.SectionNames()
	}
	for _, name := range names {
		s := sections.NewSection(name)
		if s == nil {
			continue
		}
		sub := typeSchema(reflect.TypeOf(s))
		sub["description"] = "[agents." + name + "]: the " + name + " bridge (one bridge section per agent)"
		aprops[name] = sub
	}
	agent["description"] = "an agent: a manifest file, or one bridge section (" + strings.Join(names, ", ") + ")"
	props["agents"] = map[string]any{"type": "array", "items": agent}
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["title"] = "agentgw configuration (agentgw.toml)"
	return root
}

func structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	addFields(t, props)
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

// addFields adds t's keys, flattening embedded structs as the TOML decoder
// does.
func addFields(t reflect.Type, props map[string]any) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(ft, props)
				continue
			}
		}
		if tag == "" {
			tag = f.Name
		}
		props[tag] = typeSchema(f.Type)
	}
}

func typeSchema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem())}
	case reflect.Struct:
		return structSchema(t)
	}
	return map[string]any{}
}
