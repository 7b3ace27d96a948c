package abicheck

import (
	"regexp"
	"strings"
)

// member is a struct or union member as the header declares it: its name
// ("" for an anonymous struct or union, whose members belong to the
// enclosing one), the members of an inline struct or union, or the tag of a
// named one ("struct rxe_av") whose definition holds them.
type member struct {
	name     string
	children []*member
	tag      string
}

// members returns m's members, those of the struct its tag names if it
// declares none inline, with anonymous members' members in their place.
func (m *member) members(structs map[string]*member) []*member {
	kids := m.children
	if len(kids) == 0 && m.tag != "" {
		if d := structs[m.tag]; d != nil {
			kids = d.children
		}
	}
	var out []*member
	for _, k := range kids {
		if k.name == "" {
			out = append(out, k.members(structs)...)
			continue
		}
		out = append(out, k)
	}
	return out
}

// child finds the member whose name is goName, case and underscores
// ignored.
func (m *member) child(goName string, structs map[string]*member) *member {
	want := normalize(goName)
	for _, k := range m.members(structs) {
		if normalize(k.name) == want {
			return k
		}
	}
	return nil
}

// lookup follows a designator ("wr.ud.av") down from m.
func (m *member) lookup(designator string, structs map[string]*member) *member {
	cur := m
	for _, part := range strings.Split(designator, ".") {
		var next *member
		for _, k := range cur.members(structs) {
			if k.name == part {
				next = k
				break
			}
		}
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

func normalize(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

var (
	comments   = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	directives = regexp.MustCompile(`(?m)^[ \t]*#.*(\\\n.*)*$`)
	tokens     = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*|[0-9]+|\S`)
)

// parseHeader returns the struct and union definitions of a header by
// their tags ("struct mminfo", "union rxe_gid"). It understands what the
// uapi headers use: nested and anonymous structs and unions, arrays,
// several declarators per declaration, attributes, and the
// __DECLARE_FLEX_ARRAY(type, name) macro.
func parseHeader(src string) map[string]*member {
	src = comments.ReplaceAllString(src, " ")
	src = directives.ReplaceAllString(src, " ")
	toks := tokens.FindAllString(src, -1)
	defs := map[string]*member{}
	for i := 0; i+2 < len(toks); i++ {
		if (toks[i] == "struct" || toks[i] == "union") && isIdent(toks[i+1]) && toks[i+2] == "{" {
			body, end := block(toks, i+2)
			defs[toks[i]+" "+toks[i+1]] = &member{children: parseBody(body)}
			i = end
		}
	}
	return defs
}

// block returns the tokens between the brace at open and its match, and the
// index of the match.
func block(toks []string, open int) ([]string, int) {
	depth := 0
	for j := open; j < len(toks); j++ {
		switch toks[j] {
		case "{":
			depth++
		case "}":
			if depth--; depth == 0 {
				return toks[open+1 : j], j
			}
		}
	}
	return toks[open+1:], len(toks)
}

// parseBody parses the declarations of a struct or union body.
func parseBody(toks []string) []*member {
	var out []*member
	for len(toks) > 0 {
		// One declaration: up to the ';' outside braces.
		end, depth := 0, 0
		for ; end < len(toks); end++ {
			if toks[end] == "{" {
				depth++
			} else if toks[end] == "}" {
				depth--
			} else if toks[end] == ";" && depth == 0 {
				break
			}
		}
		out = append(out, parseDecl(toks[:end])...)
		if end >= len(toks) {
			break
		}
		toks = toks[end+1:]
	}
	return out
}

// parseDecl parses one member declaration (without its ';').
func parseDecl(d []string) []*member {
	d = stripAttributes(d)
	if len(d) == 0 {
		return nil
	}
	if d[0] == "__DECLARE_FLEX_ARRAY" && len(d) >= 4 {
		// __DECLARE_FLEX_ARRAY ( type... , name )
		for j := len(d) - 1; j >= 0; j-- {
			if isIdent(d[j]) {
				return []*member{{name: d[j]}}
			}
		}
		return nil
	}
	var inline []*member
	tag := ""
	rest := d
	for j, tk := range d {
		if tk == "{" {
			body, end := block(d, j)
			inline = parseBody(body)
			rest = d[end+1:]
			break
		}
	}
	if inline == nil && len(d) >= 2 && (d[0] == "struct" || d[0] == "union") {
		tag = d[0] + " " + d[1]
	}
	if inline != nil {
		names := declarators(rest)
		if len(names) == 0 {
			return []*member{{children: inline}} // anonymous: its members are the parent's
		}
		var out []*member
		for _, n := range names {
			out = append(out, &member{name: n, children: inline})
		}
		return out
	}
	// "type words name[N], name2" — the declarators follow the type: the
	// first is the last identifier before '[' , ',' or the end.
	var out []*member
	for _, n := range declarators(d) {
		out = append(out, &member{name: n, tag: tag})
	}
	return out
}

// declarators returns the declared names of a declaration's tail: for each
// comma-separated part, its last identifier outside brackets.
func declarators(toks []string) []string {
	var names []string
	last, depth := "", 0
	for _, tk := range toks {
		switch {
		case tk == "[" || tk == "(":
			depth++
		case tk == "]" || tk == ")":
			depth--
		case tk == "," && depth == 0:
			if last != "" {
				names = append(names, last)
			}
			last = ""
		case depth == 0 && isIdent(tk) && tk != "struct" && tk != "union":
			last = tk
		}
	}
	if last != "" {
		names = append(names, last)
	}
	return names
}

// stripAttributes drops __attribute__((...)) and the like.
func stripAttributes(d []string) []string {
	var out []string
	for i := 0; i < len(d); i++ {
		if d[i] == "__attribute__" || d[i] == "__aligned" || d[i] == "__packed" {
			if i+1 < len(d) && d[i+1] == "(" {
				depth := 0
				for j := i + 1; j < len(d); j++ {
					if d[j] == "(" {
						depth++
					} else if d[j] == ")" {
						if depth--; depth == 0 {
							i = j
							break
						}
					}
				}
			}
			continue
		}
		out = append(out, d[i])
	}
	return out
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
