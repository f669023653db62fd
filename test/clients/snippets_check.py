"""snippets_check.py CLIENTS_DIR PAGE...: the client snippets of the
documentation are the tested code.

Every ```java block of the PAGEs (README.md, doc/*.md) must be a run of
consecutive lines of a .java file under CLIENTS_DIR/java, and every
```python block one of a .py file under CLIENTS_DIR/python, indentation
aside (a method shown on its own is dedented).  Prints, per block:

    PASS doc/clients.md: java block 1 (= java/src/bulkhead/Bulkhead.java:60-75)
    FAIL doc/clients.md: python block 2 is not in python/*.py: <first line>

and a FAIL line when the pages hold no java or no python block at all (the
snippets were moved to a page this check was not given), so that the check
cannot pass by finding nothing.
"""

import pathlib
import re
import sys
import textwrap

WHERE = {"java": ("java", "*.java"), "python": ("python", "*.py")}


def blocks(text):
    """(language, lines) of each fenced block of the page, its fence's
    indentation removed."""
    found = []
    for m in re.finditer(r"^([ \t]*)```(\w*)[ \t]*\n(.*?)\n[ \t]*```[ \t]*$", text, re.M | re.S):
        indent = len(m.group(1))
        lines = [re.sub(r"^ {0,%d}" % indent, "", l) for l in m.group(3).split("\n")]
        found.append((m.group(2), lines))
    return found


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
    clients = pathlib.Path(sys.argv[1])
    root = clients.parent.parent
    total = {lang: 0 for lang in WHERE}
    for page in map(pathlib.Path, sys.argv[2:]):
        try:
            name = page.resolve().relative_to(root.resolve())
        except ValueError:
            name = page
        count = {}
        for lang, block in blocks(page.read_text()):
            if lang not in WHERE:
                continue
            count[lang] = count.get(lang, 0) + 1
            total[lang] += 1
            sub, pattern = WHERE[lang]
            label = f"{name}: {lang} block {count[lang]}"
            for path in sorted((clients / sub).rglob(pattern)):
                span = find(block, path)
                if span:
                    print(f"PASS {label} (= {path.relative_to(clients)}:{span[0]}-{span[1]})")
                    break
            else:
                print(f"FAIL {label} is not in {sub}/{pattern}: {block[0].strip()}")
    for lang, n in total.items():
        if n == 0:
            print(f"FAIL snippets: no {lang} block in {' '.join(sys.argv[2:])}")


if __name__ == "__main__":
    main()
