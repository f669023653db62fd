# 201_tenants_interplay.pl: keys with the rest of bulkhead.  A keyed leaf
# of a budget serves its keys in turn; shadow mode grants every key and
# caps none; a terminated keyed holder or waiter leaves no key behind; a
# holder moved by max_hold leaves its key in the workload it left; a
# workload deleted while keys are in use drains them; max_bypass orders
# the waiters within a key.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('tenants_interplay');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('b', 1);
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('leaf', 1, 20, '60s', 'b'), ('sib', 1, 20, '60s', 'b');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, mode, max_running_per_key)
	VALUES ('sh', 1, 0, '60s', 'shadow', 1);
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('dst', 5, 0, '0');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_hold, on_max_hold, move_to)
	VALUES ('src', 1, 5, '60s', '1s', 'move', 'dst');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('gone', 1, 5, '60s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_bypass)
	VALUES ('warm', 1, 10, '60s', '1h');
	CREATE TABLE grants (id serial PRIMARY KEY, who text NOT NULL);
	});
wait_loaded($node, $_, 1) for qw(leaf sib sh src gone warm);

sub keys_of
{
	my ($w) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(key || ' ' || running || '/' || queued, ', ' ORDER BY key), '')"
		  . " FROM bulkhead_keys WHERE workload = '$w'");
}

# 1. A keyed leaf of a budget: the budget's one permit is held by key x of
# the leaf; x queues 3 more, y one after them; the sibling one after that.
# The budget serves its children by its own rule; within the leaf, key y
# (served least) goes before x's queue, and x's callers in arrival order.
my $h = session($node);
sql($h, "SELECT bulkhead_acquire('leaf', NULL, 'x')");
my @s = queue_recorders($node,
	[ 'leaf', 'x1', 'x' ], [ 'leaf', 'x2', 'x' ], [ 'leaf', 'x3', 'x' ],
	[ 'leaf', 'y1', 'y' ], [ 'sib', 's1' ]);
sql($h, "SELECT bulkhead_release('leaf')");
my @o = split /,/, grant_order($node, 5);
my %pos = map { $o[$_] => $_ } 0 .. $#o;
ok($pos{y1} < $pos{x1}, "within the keyed leaf, key y goes before x's queue (order: @o)");
ok($pos{x1} < $pos{x2} && $pos{x2} < $pos{x3}, 'FIFO within key x');
ok(defined $pos{s1}, 'the sibling is served too');
finish_recorders(@s);
is(keys_of('leaf'), '', 'the leaf\'s keys are gone once idle');

# 2. Shadow mode: every caller is granted, the per-key cap is not enforced
# (shadow enforces nothing), and the keys are shown while held
my $s1 = session($node);
my $s2 = session($node);
sql($s1, "SELECT bulkhead_acquire('sh', '0', 'k')");
is(sql($s2, "SELECT bulkhead_try_acquire('sh', '0', 'k')"), 't',
	'shadow: a second permit of key k beyond max_running and max_running_per_key');
is(keys_of('sh'), 'k 2/0', 'shadow: key k holds 2');
sql($_, "SELECT bulkhead_release('sh')") for ($s1, $s2);
is(keys_of('sh'), '', 'shadow: the key is gone after the releases');

# 3. Terminated: a keyed holder and a keyed waiter are terminated; their
# keys leave the table and the permit goes on
my $t1 = session($node);
my $t2 = session($node);
my $pid1 = sql($t1, "SELECT pg_backend_pid()");
my $pid2 = sql($t2, "SELECT pg_backend_pid()");
sql($t1, "SELECT bulkhead_acquire('gone', NULL, 'victim')");
send_async($t2, "SELECT bulkhead_acquire('gone', NULL, 'waiter');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'gone' AND state = 'queued'"),
	'the keyed waiter queues');
is(keys_of('gone'), 'victim 1/0, waiter 0/1', 'both keys in use');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid2)");
ok(poll_until($node, "SELECT count(*) = 0 FROM bulkhead_keys WHERE key = 'waiter'"),
	'a terminated keyed waiter leaves no key behind');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid1)");
ok(poll_until($node, "SELECT count(*) = 0 FROM bulkhead_keys WHERE workload = 'gone'"),
	'a terminated keyed holder leaves no key behind');

# 4. Deleted while keys are in use: the holder keeps its permit and key,
# the waiter is still served, and both keys go as they finish
my $d1 = session($node);
my $d2 = session($node);
sql($d1, "SELECT bulkhead_acquire('gone', NULL, 'p')");
send_async($d2, "SELECT bulkhead_acquire('gone', NULL, 'q');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'gone' AND state = 'queued'"),
	'q queues');
$node->safe_psql('postgres', "DELETE FROM bulkhead_workload WHERE name = 'gone'");
ok(poll_until($node, "SELECT count(*) = 0 FROM bulkhead_stats WHERE workload = 'gone'"),
	'the workload is deleted');
is(keys_of('gone'), 'p 1/0, q 0/1', 'its keys are still in use');
sql($d1, "SELECT bulkhead_release('gone')");
my ($out, $err) = finish_async($d2);
is($err, '', 'the waiter of the deleted workload is served');
sql($d2, "SELECT bulkhead_release('gone')");
is(keys_of('gone'), '', 'and the keys are gone');

# 5. A keyed holder moved by max_hold: its key stays behind (freed in src,
# with src's queue served), and it counts without a key in dst
my $m1 = session($node);
my $m2 = session($node);
sql($m1, "SELECT bulkhead_acquire('src', NULL, 'mover')");
send_async($m2, "SELECT bulkhead_acquire('src', NULL, 'next');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'dst' AND moved_from = 'src' AND key IS NULL",
		30),
	'the holder moved to dst, without its key');
($out, $err) = finish_async($m2);
is($err, '', 'src\'s keyed waiter is served at the move');
is(keys_of('src'), 'next 1/0', 'in src only the waiter\'s key is left');
sql($m1, "SELECT bulkhead_release('src')");	# by the name it was taken with
sql($m2, "SELECT bulkhead_release('src')");
is(keys_of('src') . keys_of('dst'), '', 'no key left in src or dst');

# 6. max_bypass within keys: the least served key first, and within it the
# newest caller
sql($h, "SELECT bulkhead_acquire('warm', NULL, 'a')");
@s = queue_recorders($node, [ 'warm', 'a1', 'a' ], [ 'warm', 'a2', 'a' ], [ 'warm', 'b1', 'b' ]);
sql($h, "SELECT bulkhead_release('warm')");
is(grant_order($node, 3), 'b1,a2,a1', 'max_bypass: key b first, then a\'s newest');
finish_recorders(@s);

my $st = $node->safe_psql('postgres',
	"SELECT string_agg(workload || ' ' || running || '/' || queued, ', ' ORDER BY workload) FROM bulkhead_stats");
is($st, 'b 0/0, dst 0/0, leaf 0/0, sh 0/0, sib 0/0, src 0/0, warm 0/0',
	'nothing left running or queued');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_keys'), '0', 'no key in use');

close_session($_) for ($h, $s1, $s2, $d1, $d2, $m1, $m2);
$node->stop;
done_testing();
