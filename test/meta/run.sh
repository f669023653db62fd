#!/usr/bin/env bash
# test/meta/run.sh: META.json, the PGXN metadata (spec 1.0.0), against the
# tree: its version is bulkhead.control's default_version (as semver: '1.2'
# is 1.2.0), so is the version it gives the extension in "provides", every
# file and directory it names exists, and the fields PGXN requires are there
# with valid values. Ends with "N passed, N failed"; exit status 0 only if
# all passed. Needs python3 only.
#
#   bash test/meta/run.sh [TREE]        (default: this tree)
set -euo pipefail

TREE=${1:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)}

exec python3 - "$TREE" <<'EOF'
import json, os, re, sys

tree = sys.argv[1]
passed = failed = 0

def check(name, ok, detail=''):
    global passed, failed
    if ok:
        passed += 1
        print('ok: ' + name)
    else:
        failed += 1
        print('FAILED: ' + name + (': ' + detail if detail else ''))

def finish():
    print('%d passed, %d failed' % (passed, failed))
    sys.exit(0 if failed == 0 and passed > 0 else 1)

try:
    with open(os.path.join(tree, 'META.json'), encoding='utf-8') as f:
        meta = json.load(f)
    check('META.json is valid JSON', True)
except (OSError, ValueError) as e:
    check('META.json is valid JSON', False, str(e))
    finish()

# default_version of bulkhead.control
control = open(os.path.join(tree, 'bulkhead.control'), encoding='utf-8').read()
m = re.search(r"^\s*default_version\s*=\s*'([^']*)'", control, re.M)
default_version = m.group(1) if m else None
check("bulkhead.control has a default_version", default_version is not None)

def as_semver(v):
    """'1.2' -> '1.2.0': PGXN versions are semantic versions."""
    parts = v.split('.')
    return '.'.join(parts + ['0'] * (3 - len(parts))) if len(parts) < 3 else v

semver = re.compile(r'^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$')

for key in ('name', 'abstract', 'version', 'maintainer', 'license',
            'provides', 'meta-spec'):
    check('required field "%s"' % key, key in meta)
check('meta-spec version 1.0.0',
      meta.get('meta-spec', {}).get('version') == '1.0.0')
check('name is bulkhead', meta.get('name') == 'bulkhead')

version = meta.get('version', '')
check('version %r is a semantic version' % version, bool(semver.match(version)))
if default_version is not None:
    check('version %r is default_version %r of bulkhead.control'
          % (version, default_version),
          version == as_semver(default_version))

provides = meta.get('provides', {})
check('provides the extension bulkhead', 'bulkhead' in provides)
for ext, p in sorted(provides.items()):
    check('provides.%s has file and version' % ext,
          'file' in p and 'version' in p)
    if default_version is not None:
        check('provides.%s.version %r is default_version %r'
              % (ext, p.get('version'), default_version),
              p.get('version') == as_semver(default_version))
    if 'file' in p:
        check('provides.%s.file is the install script of that version'
              % ext, p['file'] == 'sql/%s--%s.sql' % (ext, default_version),
              p['file'])

# every file and directory named exists in the tree
named = []
for ext, p in provides.items():
    named += [(p[k], 'file') for k in ('file', 'docfile') if k in p]
no_index = meta.get('no_index', {})
named += [(f, 'file') for f in no_index.get('file', [])]
named += [(d, 'dir') for d in no_index.get('directory', [])]
for path, kind in named:
    full = os.path.join(tree, path)
    check('%s %s exists' % (kind, path),
          os.path.isfile(full) if kind == 'file' else os.path.isdir(full))

# license: one of the spec's strings (or a list of them, or a map name -> URL)
licenses = {'agpl_3', 'apache_1_1', 'apache_2_0', 'artistic_1', 'artistic_2',
            'bsd', 'freebsd', 'gfdl_1_2', 'gfdl_1_3', 'gpl_1', 'gpl_2',
            'gpl_3', 'lgpl_2_1', 'lgpl_3_0', 'mit', 'mozilla_1_0',
            'mozilla_1_1', 'openssl', 'perl_5', 'postgresql', 'qpl_1_0',
            'ssleay', 'sun', 'zlib', 'open_source', 'restricted',
            'unrestricted', 'unknown'}
lic = meta.get('license')
check('license %r is valid for PGXN' % (lic,),
      (isinstance(lic, str) and lic in licenses)
      or (isinstance(lic, list) and lic and all(l in licenses for l in lic))
      or isinstance(lic, dict) and len(lic) > 0)

# the oldest PostgreSQL required is the oldest one tested (scripts/postgres.sh)
pg_req = (meta.get('prereqs', {}).get('runtime', {}).get('requires', {})
          .get('PostgreSQL'))
matrix = open(os.path.join(tree, 'scripts/postgres.sh'), encoding='utf-8').read()
majors = sorted(int(x) for x in re.findall(r'^\s*"(\d+) (?:package|source) ',
                                           matrix, re.M))
check('prereqs: PostgreSQL %r is the oldest major tested (%s)'
      % (pg_req, majors[0] if majors else '?'),
      bool(majors) and pg_req == '%d.0.0' % majors[0])

# released install and upgrade scripts are never edited again: each one
# listed in test/meta/released.sha256 (sql/ file names, as sha256sum
# writes them) still has its recorded SHA-256 sum; 1.0 to 1.4 are
# released
import hashlib
released = {}
for line in open(os.path.join(tree, 'test/meta/released.sha256'), encoding='utf-8'):
    line = line.strip()
    if line:
        digest, name = line.split(None, 1)
        released[name.lstrip('*')] = digest
for name, digest in sorted(released.items()):
    path = os.path.join(tree, 'sql', name)
    try:
        actual = hashlib.sha256(open(path, 'rb').read()).hexdigest()
    except OSError as e:
        actual = str(e)
    check('released script %s is unchanged' % name, actual == digest,
          'its SHA-256 is %s, released as %s' % (actual, digest))
for v in ('1.0', '1.1', '1.2', '1.3', '1.4'):
    check('the %s install script is recorded as released' % v,
          'bulkhead--%s.sql' % v in released)

# the license: the PostgreSQL License, the same in LICENSE, META.json,
# debian/copyright and README.md
check('license is "postgresql"', lic == 'postgresql', repr(lic))
def text(path):
    try:
        return open(os.path.join(tree, path), encoding='utf-8').read()
    except OSError:
        return ''
license_text = text('LICENSE')
check('LICENSE is the PostgreSQL License',
      license_text.startswith('PostgreSQL License') and
      'Permission to use, copy, modify, and distribute this software' in license_text)
copyright = text('debian/copyright')
check('debian/copyright: every file under the PostgreSQL License, its text given',
      re.search(r'^Files: \*\n(?:.+\n)*?License: PostgreSQL$', copyright, re.M) is not None
      and re.search(r'^License: PostgreSQL\n Permission to use', copyright, re.M) is not None)
readme = text('README.md')
check('README.md says the PostgreSQL License and links LICENSE',
      re.search(r'PostgreSQL License', readme) is not None and '(LICENSE)' in readme)

# the versions the description says are tested are the matrix's
all_majors = sorted(int(x) for x in re.findall(r'^\s*"(\d+) [a-z]+ ', matrix, re.M))
m = re.search(r'Tested on PostgreSQL ([0-9, and]+)', meta.get('description', ''))
said = sorted(int(x) for x in re.findall(r'\d+', m.group(1))) if m else []
check('description: tested on %s, the majors of scripts/postgres.sh (%s)'
      % (said, all_majors), bool(all_majors) and said == all_majors)

finish()
EOF
