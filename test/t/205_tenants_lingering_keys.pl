# 205_tenants_lingering_keys.pl: a key kept idle for its debt (keys.c: it
# held more permit-time than the least served group of its workload, so it
# keeps its entry of the key table while idle) must never be why a new key
# fails with 53400.  DESIGN.md: keys live in shared memory only while they
# hold or wait; 53400 says all entries "are taken by keys holding or
# awaiting permits".
#
# Found in review: a kept key is freed only at a later unlink in its own
# workload (or taken over by a new key of that workload).  Its workload
# busy with one long holder and nothing leaving, the key kept its entry for
# ever, its debt paid long ago, and new keys of other workloads got 53400
# with the table holding fewer keys in use than bulkhead.max_keys.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use BulkheadTest;

my $node = PostgreSQL::Test::Cluster->new('tenants_lingering');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "bulkhead.max_keys = 2\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION bulkhead;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 3, 10, '60s'), ('o', 3, 10, '60s');
	});
wait_loaded($node, 'w', 3);
wait_loaded($node, 'o', 3);

sub keys_in_use
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(workload || '/' || key, ',' ORDER BY workload, key), '')"
		  . " FROM bulkhead_keys");
}

# A caller without a key holds a permit of w throughout; key x holds two
# for half a second beside it, so x goes idle owing about half a
# permit-second to that group: its entry is kept.
my $n = session($node);
sql($n, "SELECT bulkhead_acquire('w')");
my $x1 = session($node);
my $x2 = session($node);
is(sql($x1, "SELECT bulkhead_acquire('w', NULL, 'x')"), '', 'x takes a permit of w');
is(sql($x2, "SELECT bulkhead_acquire('w', NULL, 'x')"), '', 'and a second one');
usleep(500_000);
sql($x1, "SELECT bulkhead_release('w')");
sql($x2, "SELECT bulkhead_release('w')");
is(keys_in_use(), '', 'x is idle: no key in use');

# The caller without a key catches up within half a second; nothing of w
# is released after that.  The table (2 entries) has no key in use: two
# new keys of o must each get an entry.
usleep(1_500_000);
my $p = session($node);
my ($q, $qpid) = verbose_session($node);
is(sql($p, "SELECT bulkhead_acquire('o', NULL, 'p')"), '', 'a new key p of o takes an entry');
my ($out, $err) = sql2($q, "SELECT bulkhead_acquire('o', NULL, 'q')");
is($err, '', 'a second new key q of o takes the other: x, idle, gave its entry back');
is(keys_in_use(), 'o/p,o/q', 'bulkhead_keys: p and q in use');

# With the table full of keys in use, a new key still fails with 53400,
# and x coming back to w is one more new key
($out, $err) = sql2($x1, "SELECT bulkhead_acquire('w', NULL, 'x')");
like($err, qr/too many bulkhead keys in use/, 'with p and q in use, x gets 53400');
sql($q, "SELECT bulkhead_release('o')");
is(sql($x1, "SELECT bulkhead_acquire('w', NULL, 'x')"), '', 'q released: x takes its entry');
is(keys_in_use(), 'o/p,w/x', 'bulkhead_keys: p and x in use');

# Same when the idle key's debt is not paid yet: x holds two permits of w
# for a second beside the caller without a key, goes idle, and a new key
# of o gets x's entry at once (x's debt is forgotten, as when a new key of
# w takes the entry over).
is(sql($x2, "SELECT bulkhead_acquire('w', NULL, 'x')"), '', 'x takes a second permit of w');
usleep(1_000_000);
sql($x1, "SELECT bulkhead_release('w')");
sql($x2, "SELECT bulkhead_release('w')");
is(keys_in_use(), 'o/p', 'x is idle, owing');
($out, $err) = sql2($q, "SELECT bulkhead_acquire('o', NULL, 'q')");
is($err, '', 'a new key of o takes the entry of x, idle with its debt');
is(keys_in_use(), 'o/p,o/q', 'bulkhead_keys: p and q in use');

# Everything released: both entries free again
sql($q, "SELECT bulkhead_release('o')");
sql($p, "SELECT bulkhead_release('o')");
sql($n, "SELECT bulkhead_release('w')");
is(keys_in_use(), '', 'no key in use at the end');
is(sql($p, "SELECT bulkhead_acquire('o', NULL, 'r')"), '', 'a new key r takes an entry');
is(sql($q, "SELECT bulkhead_acquire('o', NULL, 's')"), '', 'and s the other');
($out, $err) = sql2($x1, "SELECT bulkhead_acquire('w', NULL, 'y')");
like($err, qr/too many bulkhead keys in use/, 'a third key: 53400');
sql($p, "SELECT bulkhead_release('o')");
sql($q, "SELECT bulkhead_release('o')");

$_->quit for ($n, $x1, $x2, $p, $q);
$node->stop;
done_testing();
