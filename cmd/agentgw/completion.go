package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

func init() {
	register(command{name: "completion", summary: "print a shell completion script: completion bash|zsh|fish", run: runCompletion})
}

const completionSynopsis = `completion bash|zsh|fish

Prints a completion script for the shell, covering every command, its
subcommands and its flags (read from the commands' own --help, so it never
drifts from them). Install it, for example:

  bash: agentgw completion bash > /etc/bash_completion.d/agentgw
  zsh:  agentgw completion zsh > "${fpath[1]}/_agentgw"
  fish: agentgw completion fish > ~/.config/fish/completions/agentgw.fish`

// completionWord is one command or subcommand with its flags.
type completionWord struct {
	name  string
	help  string
	subs  []string
	flags []string            // without dashes
	sub   map[string][]string // subcommand -> its flags
}

var (
	helpFlagLine = regexp.MustCompile(`^  -{1,2}([A-Za-z0-9][A-Za-z0-9-]*)`)
	identWord    = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// completionTable asks every command for its --help (and each subcommand
// its own), and reads the subcommands from the synopsis lines "agentgw CMD
// SUB" and the flags from the flag package's "  -name" lines. --help runs
// no command: it only prints.
func completionTable(ctx context.Context) []completionWord {
	help := func(args ...string) string {
		var out bytes.Buffer
		run(ctx, args, &out, io.Discard)
		return out.String()
	}
	flagsOf := func(text string) []string {
		var fs []string
		for _, l := range strings.Split(text, "\n") {
			if m := helpFlagLine.FindStringSubmatch(l); m != nil && !slices.Contains(fs, m[1]) {
				fs = append(fs, m[1])
			}
		}
		sort.Strings(fs)
		return fs
	}
	var words []completionWord
	for _, c := range commands {
		w := completionWord{name: c.name, help: c.summary, sub: map[string][]string{}}
		text := help(c.name, "--help")
		w.flags = flagsOf(text)
		syn := regexp.MustCompile(`agentgw ` + regexp.QuoteMeta(c.name) + ` ([a-z][a-z0-9-]*)`)
		for _, m := range syn.FindAllStringSubmatch(text, -1) {
			if s := m[1]; identWord.MatchString(s) && !slices.Contains(w.subs, s) {
				w.subs = append(w.subs, s)
			}
		}
		if c.name == "help" || c.name == "completion" {
			w.subs = nil
		}
		if c.name == "completion" {
			w.subs = []string{"bash", "zsh", "fish"}
		}
		for _, s := range w.subs {
			if c.name != "completion" {
				w.sub[s] = flagsOf(help(c.name, s, "--help"))
			}
		}
		words = append(words, w)
	}
	sort.Slice(words, func(i, j int) bool { return words[i].name < words[j].name })
	return words
}

func runCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, completionSynopsis, "missing shell: bash, zsh or fish", stdout)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		return usagef("completion takes one shell name")
	}
	words := completionTable(ctx)
	switch sub {
	case "bash":
		writeBash(stdout, words)
	case "zsh":
		// zsh runs bash completion functions through bashcompinit.
		fmt.Fprintln(stdout, "#compdef agentgw\nautoload -U +X bashcompinit && bashcompinit")
		writeBash(stdout, words)
	case "fish":
		writeFish(stdout, words)
	default:
		return usagef("unknown shell %q: bash, zsh or fish", sub)
	}
	return nil
}

func dashed(fs []string) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = "--" + f
	}
	return strings.Join(out, " ")
}

func writeBash(w io.Writer, words []completionWord) {
	var names []string
	for _, c := range words {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, `# agentgw completion for bash (agentgw completion bash)
_agentgw() {
  local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} sub=${COMP_WORDS[2]}
  local prev=${COMP_WORDS[COMP_CWORD-1]}
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "%s help" -- "$cur")); return
  fi
  case $prev in
    --config|--out|--password-file|--secret-file|--file|--manifest|--dir) COMPREPLY=($(compgen -f -- "$cur")); return;;
  esac
  local words=""
  case $cmd in
`, strings.Join(names, " "))
	for _, c := range words {
		fmt.Fprintf(w, "    %s)\n", c.name)
		if len(c.subs) > 0 {
			fmt.Fprintf(w, "      if [[ $COMP_CWORD -eq 2 ]]; then words=%q\n      else case $sub in\n", strings.Join(c.subs, " "))
			for _, s := range c.subs {
				fmt.Fprintf(w, "        %s) words=%q;;\n", s, dashed(c.sub[s]))
			}
			fmt.Fprintf(w, "      esac; fi;;\n")
		} else {
			fmt.Fprintf(w, "      words=%q;;\n", dashed(c.flags))
		}
	}
	fmt.Fprint(w, `  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _agentgw agentgw
`)
}

func writeFish(w io.Writer, words []completionWord) {
	fmt.Fprintln(w, "# agentgw completion for fish (agentgw completion fish)\ncomplete -c agentgw -f")
	var names []string
	for _, c := range words {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, "complete -c agentgw -n 'not __fish_seen_subcommand_from %s' -a '%s'\n", strings.Join(names, " "), strings.Join(names, " "))
	for _, c := range words {
		fmt.Fprintf(w, "complete -c agentgw -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -a '%s' -d %s\n",
			c.name, strings.Join(append([]string{"--"}, c.subs...), " "), strings.Join(c.subs, " "), fishQuote(c.help))
		flags := c.flags
		for _, s := range c.subs {
			flags = append(flags, c.sub[s]...)
		}
		slices.Sort(flags)
		for _, f := range slices.Compact(flags) {
			fmt.Fprintf(w, "complete -c agentgw -n '__fish_seen_subcommand_from %s' -l %s\n", c.name, f)
		}
	}
}

func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `\'`) + "'"
}
