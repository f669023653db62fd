"""junit_results.py PREFIX FILE.xml: one line per test case of a JUnit XML
report (JUnit 5's console launcher, pytest --junitxml):

    PASS <PREFIX><name>
    FAIL <PREFIX><name>: <first line of the message>

test/clients/run.sh counts these lines.  An unreadable report prints
nothing (run.sh then counts the run itself as one failure).
"""

import sys
import xml.etree.ElementTree as ET


def main():
    prefix, path = sys.argv[1:3]
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"junit_results: {path}: {e}", file=sys.stderr)
        return
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        bad = [c for c in case if c.tag in ("failure", "error")]
        if bad:
            message = (bad[0].get("message") or bad[0].text or "").strip().splitlines()
            print(f"FAIL {prefix}{name}: {message[0] if message else bad[0].tag}")
        elif any(c.tag == "skipped" for c in case):
            print(f"FAIL {prefix}{name}: skipped")
        else:
            print(f"PASS {prefix}{name}")


if __name__ == "__main__":
    main()
