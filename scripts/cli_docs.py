#!/usr/bin/env python3
"""Writes ckptcheck's man page and bash completion from the built CLI's own --help output.

Usage: cli_docs.py CKPTCHECK --man OUT.1 --completion OUT.bash

The subcommands are the ones `CKPTCHECK --help` lists, and each one's options are what
`CKPTCHECK SUB --help` prints, so neither file can fall out of step with the flags. Exit 0, or
2 with one line naming the program when it cannot be run.
"""
import argparse
import os
import re
import subprocess
import sys

OPTION = re.compile(r"^  (-\S+)")
ENTRY = re.compile(r"^  (\S+)\s+(.*)$")


def fail(message):
    print("cli_docs: " + message, file=sys.stderr)
    sys.exit(2)


def run_help(program, args):
    env = dict(os.environ, COLUMNS="100")
    try:
        done = subprocess.run([program] + args + ["--help"], capture_output=True, text=True, env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        fail("%s: cannot run: %s" % (program, e))
    if done.returncode != 0:
        fail("%s %s --help: exit %d: %s" % (program, " ".join(args), done.returncode, done.stderr.strip()))
    # The usage line names the program as it was invoked; the page names it as installed.
    return done.stdout.replace(program, "ckptcheck")


def section(text, title):
    lines, inside = [], False
    for line in text.splitlines():
        if line.rstrip() == title + ":":
            inside = True
        elif inside and line and not line.startswith(" "):
            break
        elif inside:
            lines.append(line)
    return lines


def subcommands(top_help):
    return [(m.group(1), m.group(2)) for m in map(ENTRY.match, section(top_help, "Subcommands")) if m]


def option_names(sub_help):
    # Options are listed under "Options:" and under named groups ("Built-in workload only ...:").
    names = []
    for line in sub_help.splitlines():
        m = OPTION.match(line)
        if m:
            names.extend(n for n in m.group(1).split(",") if n.startswith("-"))
    return names


def roff(text):
    out = []
    for line in text.splitlines():
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def man_page(version, top_help, subs):
    page = [
        '.TH CKPTCHECK 1 "" "ckptcheck %s" "User Commands"' % version,
        ".SH NAME",
        "ckptcheck \\- prove a training run can be stopped and resumed",
        ".SH SYNOPSIS",
        ".B ckptcheck",
        "\\fISUBCOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        "ckptcheck saves training state as sharded, hashed, atomically committed checkpoints, kills a",
        "training process with SIGKILL, restores a fresh one and compares it with an uninterrupted run;",
        "it verifies and inspects checkpoints offline.",
        ".PP",
        ".nf",
        roff(top_help.strip()),
        ".fi",
        ".SH SUBCOMMANDS",
    ]
    for name, summary, sub_help in subs:
        page += [".SS %s" % name, roff(summary), ".PP", ".nf", roff(sub_help.strip()), ".fi"]
    page += [
        ".SH EXIT STATUS",
        ".TP", "0", "every check passed",
        ".TP", "1", "a checkpoint, drill or diff failed a check: corruption, divergence, bad signature",
        ".TP", "2", "usage or I/O error: bad flag, bad or missing config, unreadable path, refused drift",
        ".SH FILES",
        "ckptcheck-train, beside ckptcheck (or in ../libexec): the training program `ckptcheck train` runs.",
        "",
    ]
    return "\n".join(page)


def completion(subs):
    cases = "\n".join('    %s) opts="%s" ;;' % (name, " ".join(opts)) for name, _, opts in subs)
    names = " ".join(name for name, _, _ in subs)
    return """# bash completion for ckptcheck (generated from its --help by scripts/cli_docs.py)
_ckptcheck() {
  local cur=${COMP_WORDS[COMP_CWORD]} sub="" opts="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ ${COMP_WORDS[i]} == -- ]] && { COMPREPLY=($(compgen -c -- "$cur")); return; }
    case " %s " in *" ${COMP_WORDS[i]} "*) sub=${COMP_WORDS[i]}; break ;; esac
  done
  if [[ -z $sub ]]; then
    COMPREPLY=($(compgen -W "%s --help --version" -- "$cur"))
    return
  fi
  case $sub in
%s
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _ckptcheck ckptcheck
""" % (names, names, cases)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("--man", required=True)
    parser.add_argument("--completion", required=True)
    args = parser.parse_args()
    top_help = run_help(args.program, [])
    version_line = subprocess.run([args.program, "--version"], capture_output=True, text=True).stdout
    version = (version_line.split("\n")[0].split() or ["unknown"])[-1]
    subs = subcommands(top_help)
    if not subs:
        fail("%s --help lists no subcommands" % args.program)
    helps = [(name, summary, run_help(args.program, [name])) for name, summary in subs]
    with open(args.man, "w") as f:
        f.write(man_page(version, top_help, helps))
    with open(args.completion, "w") as f:
        f.write(completion([(name, summary, option_names(text)) for name, summary, text in helps]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
