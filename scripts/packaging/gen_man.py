#!/usr/bin/env python3
"""Writes a man page (roff) from a program's --help, so the page can never
disagree with the flags the program accepts.

Understands both help layouts used here: ctrun's (an option line, then its
description indented on the lines below) and CLI11's (ctrund: option and
description on one line, separated by two or more spaces). Lines ending in
':' at column 0 are section headings; "Options:"/groups become OPTIONS
subsections, "Environment:" becomes ENVIRONMENT.

usage: gen_man.py --binary PATH --name NAME --summary TEXT --version TEXT
                  [--extra FILE] --output FILE
"""
import argparse
import re
import subprocess
import sys

HEADING = re.compile(r"^(\S[^:]*):\s*$")
ENTRY = re.compile(r"^  (\S.*)$")
SPLIT = re.compile(r"\s{2,}")


def escape(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def bold_flags(term):
    """'--a, --b META' -> roff with the flags bold and the metavar italic."""
    words = []
    for word in term.split(" "):
        if word.startswith("-"):
            comma = "," if word.endswith(",") else ""
            words.append("\\fB" + escape(word.rstrip(",")) + "\\fR" + comma)
        elif word:
            words.append("\\fI" + escape(word) + "\\fR")
    return " ".join(words)


def synopsis(name, usage):
    rest = usage.split(" ", 1)[1] if usage.startswith(name + " ") else ""
    return f"\\fB{escape(name)}\\fR " + bold_flags(rest)


def parse(help_text):
    """Returns (usage, description paragraphs, [(heading, [(term, text)])])."""
    usage, description, sections = "", [], []
    paragraph = []
    for raw in help_text.splitlines():
        line = raw.rstrip()
        lower = line.lower()
        if lower.startswith("usage:"):
            usage = line.split(":", 1)[1].strip()
            continue
        m = HEADING.match(line)
        if m and not line.startswith(" "):
            sections.append((m.group(1), []))
            continue
        if not sections:
            if line:
                paragraph.append(line)
            elif paragraph:
                description.append(" ".join(paragraph))
                paragraph = []
            continue
        if line:
            sections[-1][1].append(line)
    if paragraph:
        description.append(" ".join(paragraph))
    return usage, description, [(h, entries(lines)) for h, lines in sections]


def entries(lines):
    """[(term, text)] from a section's lines. Where terms and texts share a
    line (CLI11), the text column is the most common end of a 2+ space gap;
    a term that fills its column up to one space is split there too."""
    gaps = [m.end() for line in lines if ENTRY.match(line)
            for m in [SPLIT.search(line, 2)] if m]
    column = max(set(gaps), key=gaps.count) if gaps else None
    out = []
    for line in lines:
        m = ENTRY.match(line)
        if m:
            gap = SPLIT.search(line, 2)
            if gap:
                out.append([line[2:gap.start()], line[gap.end():]])
            elif column and len(line) > column and line[column - 1] == " ":
                out.append([line[2:column].strip(), line[column:]])
            else:
                out.append([m.group(1), ""])
        elif out:
            out[-1][1] = (out[-1][1] + " " + line.strip()).strip()
    return [(term, text) for term, text in out]


def render(name, summary, version, usage, description, sections, extra):
    out = [f'.TH {name.upper()} 1 "" "{escape(version)}" "User Commands"',
           ".SH NAME", f"{escape(name)} \\- {escape(summary)}",
           ".SH SYNOPSIS", synopsis(name, usage)]
    if description:
        out.append(".SH DESCRIPTION")
        for i, p in enumerate(description):
            if i:
                out.append(".PP")
            out.append(escape(p))
    options = [s for s in sections if s[0].lower() != "environment"]
    environment = [s for s in sections if s[0].lower() == "environment"]
    if options:
        out.append(".SH OPTIONS")
        for heading, entries in options:
            if len(options) > 1 or heading.lower() != "options":
                out.append(f".SS {escape(heading)}")
            for term, text in entries:
                out += [".TP", bold_flags(term), escape(text)]
    for _, entries in environment:
        out.append(".SH ENVIRONMENT")
        for term, text in entries:
            out += [".TP", f"\\fB{escape(term)}\\fR", escape(text)]
    if extra:
        out.append(extra.rstrip("\n"))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--extra")
    ap.add_argument("--output", required=True)
    a = ap.parse_args()
    proc = subprocess.run([a.binary, "--help"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or not proc.stdout.strip():
        sys.exit(f"gen_man.py: '{a.binary} --help' failed (exit {proc.returncode}): {proc.stderr.strip()}")
    extra = open(a.extra).read() if a.extra else ""
    page = render(a.name, a.summary, a.version, *parse(proc.stdout), extra)
    with open(a.output, "w") as f:
        f.write(page)


if __name__ == "__main__":
    main()
