"""readme_check.py README CLIENTS_DIR: the README's client snippets are the
tested code.

In README's section "## Using it from your application" (up to the next
"## " heading), every ```java block must be a run of consecutive lines of a
.java file under CLIENTS_DIR/java, and every ```python block one of a .py
file under CLIENTS_DIR/python, indentation aside (a method shown on its own
is dedented).  Prints, per block:

    PASS readme: java block 1 (= java/src/bulkhead/Bulkhead.java:60-75)
    FAIL readme: python block 2 is not in python/*.py: <first line>

and "NONE" when the README has no such section (yet).
"""

import pathlib
import re
import sys
import textwrap

SECTION = "## Using it from your application"


def blocks(text):
    """(language, lines) of each fenced block of the section."""
    head = re.search("^" + re.escape(SECTION) + r"[ \t]*$", text, re.M)
    if head is None:
        return None
    rest = text[head.end():]
    end = re.search(r"^## ", rest, re.M)
    section = rest[:end.start()] if end else rest
    return [(m.group(1), m.group(2).split("\n"))
            for m in re.finditer(r"^```(\w*)\n(.*?)\n```$", section, re.M | re.S)]


def dedented(lines):
    return textwrap.dedent("\n".join(lines)).split("\n")


def find(block, path):
    """1-based first and last line of block in path, or None."""
    lines = path.read_text().split("\n")
    want = dedented(block)
    n = len(want)
    for i in range(len(lines) - n + 1):
        if lines[i].strip() == want[0].strip() and dedented(lines[i:i + n]) == want:
            return i + 1, i + n
    return None


def main():
    readme, clients = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    found = blocks(readme.read_text())
    if found is None:
        print("NONE")
        return
    where = {"java": ("java", "*.java"), "python": ("python", "*.py")}
    count = {}
    for lang, block in found:
        if lang not in where:
            continue
        count[lang] = count.get(lang, 0) + 1
        sub, pattern = where[lang]
        label = f"readme: {lang} block {count[lang]}"
        for path in sorted((clients / sub).rglob(pattern)):
            span = find(block, path)
            if span:
                print(f"PASS {label} (= {path.relative_to(clients)}:{span[0]}-{span[1]})")
                break
        else:
            print(f"FAIL {label} is not in {sub}/{pattern}: {block[0].strip()}")


if __name__ == "__main__":
    main()
