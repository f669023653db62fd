#!/usr/bin/env python3
"""check.py: the Grafana dashboard against the exporter's queries.

    python3 monitoring/grafana/check.py [--queries FILE] [--dashboard FILE]

(defaults: ../prometheus/bulkhead-queries.yaml and bulkhead-dashboard.json,
beside this file). Standard library only. Checks that

  - the dashboard is well-formed JSON, and every panel has a title and at
    least one target with an expression (a row has a title and no targets);
  - no panel, target or template variable names a data source of its own:
    they all use the variable ${datasource}, so the file imports anywhere;
  - in bulkhead-queries.yaml, the columns each query's SQL returns are the
    ones its "metrics:" section declares (prometheus-postgres-exporter
    0.11.1 exports an undeclared column as an untyped metric, and a declared
    one the SQL lacks is never exported);
  - every metric the expressions of the panels and template variables name
    is one the queries export;
  - every metric the queries export is shown by some panel, or listed in
    UNUSED_ON_PURPOSE below with the reason.

The exporter names a metric <query name>_<column> for each column whose
usage is COUNTER, GAUGE or MAPPEDMETRIC; a LABEL column becomes a label, a
DISCARD column nothing. Any other usage stops the check (DURATION and
HISTOGRAM make other names; teach this file before using them).

Prints "ok: ..." or "FAILED: ..." per check, the reasons indented below,
and last "N passed, N failed"; exit status 0 only if all passed. run.sh in
monitoring/prometheus/tests runs it, and runs it on copies broken on
purpose to see it fail.
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Exported metrics that no panel shows, each with the reason. A metric
# listed here that a panel uses, or that the queries no longer export, is
# an error too: the list must stay true.
UNUSED_ON_PURPOSE = {
    "bulkhead_budget_weight":
        "a configured share (bulkhead_workload.weight), constant until the"
        " table changes: the Budget panel shows what the share gives"
        " (reserved and borrowed permits), not the setting",
}


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, problems):
        if problems:
            self.failed += 1
            print(f"FAILED: {name}")
            for p in problems:
                print(f"    {p}")
        else:
            self.passed += 1
            print(f"ok: {name}")


# ---- bulkhead-queries.yaml ----------------------------------------------
#
# PyYAML is not in the standard library, so this reads the subset of YAML
# the file is written in: top-level query names, each with "key: value"
# lines at two spaces, "query: |" followed by the SQL indented deeper, and
# "metrics:" followed by "- column:" items whose "usage:" and
# "description:" are indented deeper still. Anything else is an error, so
# that a change of layout is noticed rather than misread.

TOP_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):\s*$")
SUB_KEY = re.compile(r"^  ([A-Za-z_]+):\s*(.*?)\s*$")
ITEM = re.compile(r"^    - ([A-Za-z_][A-Za-z0-9_]*):\s*$")
ITEM_KEY = re.compile(r"^        ([A-Za-z_]+):\s*(.*?)\s*$")


def unquote(v):
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


def read_queries(path):
    """{query name: {"sql": text, "metrics": [(column, usage)]}}"""
    queries = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    cur = None        # the query being read
    block = None      # list collecting a "query: |" block, while in one
    item = None       # the metrics item being read
    for n, line in enumerate(lines, 1):
        if block is not None:
            if line.strip() == "" or line.startswith("   "):
                block.append(line)
                continue
            block = None
        if line.strip() == "" or line.lstrip().startswith("#"):
            continue
        m = TOP_KEY.match(line)
        if m:
            if m.group(1) in queries:
                raise ValueError(f"{path}:{n}: query {m.group(1)} twice")
            cur = {"sql": "", "metrics": [], "line": n}
            queries[m.group(1)] = cur
            item = None
            continue
        if cur is None:
            raise ValueError(f"{path}:{n}: expected a query name: {line!r}")
        m = SUB_KEY.match(line)
        if m:
            key, value = m.group(1), m.group(2)
            item = None
            if key == "query":
                if value == "|":
                    block = []
                    cur["sql_lines"] = block
                else:
                    cur["sql"] = unquote(value)
            elif key == "metrics" and value:
                raise ValueError(f"{path}:{n}: metrics: must be a list")
            continue
        m = ITEM.match(line)
        if m:
            item = {"column": m.group(1), "usage": None}
            cur["metrics"].append(item)
            continue
        m = ITEM_KEY.match(line)
        if m and item is not None:
            if m.group(1) == "usage":
                item["usage"] = unquote(m.group(2))
            continue
        raise ValueError(f"{path}:{n}: cannot read this line: {line!r}")
    for name, q in queries.items():
        if "sql_lines" in q:
            q["sql"] = "\n".join(q.pop("sql_lines"))
        if not q["sql"].strip():
            raise ValueError(f"{path}:{q['line']}: query {name} has no SQL")
    return queries


def strip_sql(sql):
    """The SQL without comments, and with string literals blanked (so that
    commas, parentheses and keywords inside them do not count)."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"/\*.*?\*/", " ", sql, flags=re.S)
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def select_columns(sql):
    """Output column names of the outermost SELECT, lower-cased as
    PostgreSQL folds unquoted names. Raises ValueError when it cannot
    tell."""
    s = strip_sql(sql)
    m = re.search(r"\bselect\b", s, re.I)
    if not m:
        raise ValueError("no SELECT")
    depth, start, items, end = 0, m.end(), [], None
    i = start
    while i < len(s):
        c = s[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and c == ",":
            items.append(s[start:i])
            start = i + 1
        elif depth == 0 and re.match(r"from\b", s[i:i + 5], re.I) \
                and not re.match(r"[A-Za-z0-9_.]", s[i - 1]):
            end = i
            break
        i += 1
    if end is None:
        raise ValueError("no FROM after the SELECT list")
    items.append(s[start:end])
    names = []
    for expr in (x.strip() for x in items):
        m = (re.search(r"\bas\s+\"?([A-Za-z_][A-Za-z0-9_]*)\"?$", expr, re.I)
             or re.fullmatch(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_][A-Za-z0-9_]*)", expr))
        if not m:
            raise ValueError(f"cannot tell the name of column {expr!r}: give it an AS")
        names.append(m.group(1).lower())
    return names


METRIC_USAGES = {"COUNTER", "GAUGE", "MAPPEDMETRIC"}
NO_METRIC_USAGES = {"LABEL", "DISCARD"}


def exported_metrics(queries):
    """({metric: query name}, [problems])"""
    exported, problems = {}, []
    for qname, q in queries.items():
        declared = [m["column"] for m in q["metrics"]]
        for m in q["metrics"]:
            usage = m["usage"]
            if usage in METRIC_USAGES:
                exported[f"{qname}_{m['column']}"] = qname
            elif usage not in NO_METRIC_USAGES:
                raise ValueError(f"query {qname}, column {m['column']}: usage {usage!r}"
                                 " is not one check.py knows the metric names of")
        try:
            columns = select_columns(q["sql"])
        except ValueError as e:
            problems.append(f"query {qname}: {e}")
            continue
        for c in columns:
            if c not in declared:
                # the exporter still exports it, untyped
                exported[f"{qname}_{c}"] = qname
                problems.append(f"query {qname}: column {c} is not declared under metrics:"
                                " (the exporter would export it untyped, without a description)")
        for c in declared:
            if c not in columns:
                problems.append(f"query {qname}: metrics: declares {c}, which its SQL does not return")
    return exported, problems


# ---- the dashboard --------------------------------------------------------

def all_panels(panels):
    """Every panel, those inside collapsed rows included."""
    for p in panels:
        yield p
        yield from all_panels(p.get("panels") or [])


PROMQL_KEYWORDS = {
    # binary operators, modifiers and aggregation operators: written without
    # parentheses right after them, unlike functions
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
    "group_left", "group_right", "sum", "min", "max", "avg", "group", "stddev",
    "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "inf", "nan",
}


def metric_names(expr):
    """The metric names a PromQL expression (or a Grafana variable query
    such as label_values(metric{...}, label)) reads: every identifier left
    once strings, label matchers, label lists, ranges, durations, Grafana
    variables, functions and keywords are taken out. Raises ValueError for
    a selector by __name__, whose metrics cannot be listed."""
    if "__name__" in expr:
        raise ValueError("selects metrics by __name__, which this check cannot follow:"
                         " name them")
    # Grafana's label_values(label) or label_values(metric, label): the
    # label is no metric
    lv = re.fullmatch(r"\s*label_values\s*\((.*?)(?:,)?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*",
                      expr, re.S)
    if lv:
        expr = lv.group(1)
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"#[^\n]*", " ", s)
    s = re.sub(r"\{[^{}]*\}", " ", s)                       # label matchers
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)",
               r"\1", s)                                    # label lists
    s = re.sub(r"\[[^\[\]]*\]", " ", s)                     # ranges, subqueries
    s = re.sub(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]*\]\]", " ", s)
    names = []
    for m in re.finditer(r"[0-9][0-9A-Za-z_.]*|[A-Za-z_:][A-Za-z0-9_:]*", s):
        tok = m.group(0)
        if tok[0].isdigit() or tok.lower() in PROMQL_KEYWORDS:
            continue
        if re.match(r"\s*\(", s[m.end():]):
            continue                                        # a function
        names.append(tok)
    return names


def datasource_problems(where, ds):
    if ds is None:
        return []
    uid = ds.get("uid") if isinstance(ds, dict) else ds
    if uid in ("${datasource}", "$datasource"):
        return []
    return [f"{where}: data source {ds!r} instead of the variable ${{datasource}}"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", default=os.path.join(HERE, "..", "prometheus",
                                                      "bulkhead-queries.yaml"))
    ap.add_argument("--dashboard", default=os.path.join(HERE, "bulkhead-dashboard.json"))
    args = ap.parse_args()
    r = Report()

    # the dashboard: JSON, and panels with titles and targets
    try:
        with open(args.dashboard, encoding="utf-8") as f:
            dash = json.load(f)
        problems = [] if isinstance(dash, dict) and isinstance(dash.get("panels"), list) \
            else ["no top-level \"panels\" list"]
    except (OSError, ValueError) as e:
        dash, problems = None, [str(e)]
    r.check(f"{os.path.basename(args.dashboard)} is well-formed JSON with panels", problems)
    if dash is None or problems:
        print(f"{r.passed} passed, {r.failed} failed")
        return 1

    panels = list(all_panels(dash["panels"]))
    problems, exprs = [], []      # exprs: (where, expression)
    for p in panels:
        where = f"panel {p.get('id')} {p.get('title', '')!r}"
        if not str(p.get("title", "")).strip():
            problems.append(f"panel {p.get('id')} ({p.get('type')}): no title")
        if p.get("type") == "row":
            continue
        targets = p.get("targets") or []
        if not targets:
            problems.append(f"{where}: no target")
        for t in targets:
            expr = t.get("expr", "")
            if not expr.strip():
                problems.append(f"{where}, target {t.get('refId')}: no expression")
            else:
                exprs.append((f"{where}, target {t.get('refId')}", expr))
    r.check(f"every panel has a title and targets ({len(panels)} panels,"
            f" {len(exprs)} expressions)", problems)

    problems = []
    for p in panels:
        where = f"panel {p.get('id')} {p.get('title', '')!r}"
        problems += datasource_problems(where, p.get("datasource"))
        for t in p.get("targets") or []:
            problems += datasource_problems(f"{where}, target {t.get('refId')}",
                                            t.get("datasource"))
    variables = (dash.get("templating") or {}).get("list") or []
    if not any(v.get("type") == "datasource" and v.get("name") == "datasource"
               for v in variables):
        problems.append("no template variable \"datasource\" of type datasource")
    for v in variables:
        where = f"variable {v.get('name')}"
        problems += datasource_problems(where, v.get("datasource"))
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query", "") if isinstance(q, dict) else (q or "")
            exprs.append((where, q))
    r.check("every panel, target and variable uses the data source variable", problems)

    # the queries file and what it exports
    try:
        queries = read_queries(args.queries)
        exported, problems = exported_metrics(queries)
    except (OSError, ValueError) as e:
        r.check(f"read {os.path.basename(args.queries)}", [str(e)])
        print(f"{r.passed} passed, {r.failed} failed")
        return 1
    r.check(f"{os.path.basename(args.queries)}: each query's SQL columns are those of"
            f" its metrics: ({len(queries)} queries, {len(exported)} metrics)", problems)

    # (a) the expressions name exported metrics only
    used, problems = {}, []
    for where, expr in exprs:
        try:
            names = metric_names(expr)
        except ValueError as e:
            problems.append(f"{where}: {e}")
            continue
        for name in names:
            if name in exported:
                used.setdefault(name, where)
            else:
                problems.append(f"{where}: {name} is not exported by the queries"
                                f" (in: {' '.join(expr.split())})")
    r.check("the panels and variables name only metrics the queries export", problems)

    # (b) every exported metric is shown, or unused on purpose
    problems = []
    for name in sorted(exported):
        if name not in used and name not in UNUSED_ON_PURPOSE:
            problems.append(f"{name}: exported (query {exported[name]}), shown by no panel"
                            " and not in UNUSED_ON_PURPOSE")
    r.check("every exported metric is shown by a panel or unused on purpose", problems)

    problems = []
    for name, why in sorted(UNUSED_ON_PURPOSE.items()):
        if not why.strip():
            problems.append(f"{name}: no reason given")
        if name not in exported:
            problems.append(f"{name}: listed as unused, but the queries do not export it")
        elif name in used:
            problems.append(f"{name}: listed as unused, but {used[name]} uses it")
    r.check(f"UNUSED_ON_PURPOSE is current ({len(UNUSED_ON_PURPOSE)} metrics)", problems)

    print(f"{r.passed} passed, {r.failed} failed")
    return 0 if r.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
