# 202_tenants_review.pl: tenants (keys) beside the other features, from a
# review of issue 22.
#
# 1. A keyed workload whose waiters all wait for a key at its cap, and that
#    becomes a budget (a workload names it as parent): those waiters of the
#    budget's own must not keep the children's waiters from free permits.
# 2. Shadow mode never queues: a switch to shadow serves the waiters of a
#    key at max_running_per_key, and in a tree a shadow leaf's per-key cap
#    is only counted (the budgets above still decide).
# 3. The deadlock check sees a cycle through a key at its cap while the
#    workload has permits free for other keys.
# 4. bulkhead.key set as a connection option with bytes not valid in the
#    database encoding.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('tenants_review');

# 1. p: 5 permits, one per key.  k holds one and has a caller waiting.
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_running_per_key)
	VALUES ('p', 5, 10, '60s', 1);
});
wait_loaded($node, 'p', 5);
my $k1 = session($node);
sql($k1, "SELECT bulkhead_acquire('p', NULL, 'k')");
my $k2 = session($node);
send_async($k2, "SELECT bulkhead_acquire('p', NULL, 'k');");
ok(poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'p' AND state = 'queued'"),
	'a second caller of key k waits (k at its cap)');

# p becomes a budget: c, one permit, under it
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('c', 1, 10, '60s', 'p');
});
wait_loaded($node, 'c', 1);
my $c1 = session($node);
is(sql($c1, "SELECT bulkhead_acquire('c')"), '', 'c takes its one permit');
my $c2 = session($node);
send_async($c2, "SELECT bulkhead_acquire('c', '30s');");
ok(poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'c' AND state = 'queued'"),
	'c\'s second caller waits for c\'s permit');
sql($c1, "SELECT bulkhead_release('c')");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'c' AND state = 'running'",
		15),
	'c\'s release serves c\'s waiter: p has 3 permits free, k\'s capped waiter does not stand in the way');
my ($out, $err) = finish_async($c2);
is($err, '', 'c\'s waiter got its permit without an error');
sql($c2, "SELECT bulkhead_release_all()");
sql($k1, "SELECT bulkhead_release('p')");
($out, $err) = finish_async($k2);
is($err, '', 'k\'s waiter is served by k\'s release');
sql($k2, "SELECT bulkhead_release('p')");
$node->safe_psql('postgres', "DELETE FROM bulkhead_workload WHERE name IN ('c', 'p')");
ok(poll_until($node, "SELECT count(*) = 0 FROM bulkhead_stats WHERE workload IN ('c', 'p')"),
	'p and c are gone');

# 2a. A switch to shadow serves the waiters of a key at its cap
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_running_per_key)
	VALUES ('s', 5, 10, '60s', 1);
});
wait_loaded($node, 's', 5);
sql($k1, "SELECT bulkhead_acquire('s', NULL, 'k')");
send_async($k2, "SELECT bulkhead_acquire('s', NULL, 'k');");
ok(poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 's' AND state = 'queued'"),
	'key k\'s second caller waits');
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET mode = 'shadow' WHERE name = 's'");
ok( poll_until(
		$node,
		"SELECT count(*) = 2 FROM bulkhead_activity WHERE workload = 's' AND state = 'running'",
		15),
	'the switch to shadow serves the waiter of the capped key');
is(sql($c1, "SELECT bulkhead_try_acquire('s', '0', 'k')"), 't',
	'in shadow mode a third caller of k gets its permit at once');
sql($c1, "SELECT bulkhead_release('s')");
sql($k1, "SELECT bulkhead_release('s')");
($out, $err) = finish_async($k2);
is($err, '', 'k\'s waiter got its permit without an error');
sql($k2, "SELECT bulkhead_release('s')");

# 2b. In a tree: a shadow leaf's cap per key is only counted
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('b', 10, 10, '60s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_running_per_key, max_queued_per_key, mode, parent)
	VALUES ('sl', 5, 10, '60s', 1, 0, 'shadow', 'b');
});
wait_loaded($node, 'sl', 5);
sql($k1, "SELECT bulkhead_acquire('sl', NULL, 'k')");
is(sql($k2, "SELECT bulkhead_try_acquire('sl', '0', 'k')"), 't',
	'a shadow leaf in a tree: a second caller of a capped key gets its permit (the budget has room)');
($out, $err) = sql2($c1, "SELECT bulkhead_acquire('sl', '1s', 'k')");
is($err, '', 'and a third is neither queued nor rejected by max_queued_per_key = 0');
sql($_, "SELECT bulkhead_release_all()") for ($k1, $k2, $c1);

# 3. A deadlock through a key's cap: d has permits free, but key k holds
# its one permit (max_running_per_key = 1) in k1, which waits for a row
# lock that k2 holds while k2 waits for a permit of key k.  Only k1's
# release can serve k2: the deadlock check reports it (40P01), the free
# permits of other keys notwithstanding.
$node->safe_psql('postgres', q{
	CREATE TABLE r (id int PRIMARY KEY, n int);
	INSERT INTO r VALUES (1, 0);
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_running_per_key)
	VALUES ('d', 5, 10, '60s', 1);
});
wait_loaded($node, 'd', 5);
sql($k2, "BEGIN; UPDATE r SET n = n + 1 WHERE id = 1;");
sql($k1, "BEGIN; SELECT bulkhead_acquire_xact('d', NULL, 'k');");
send_async($k1, "UPDATE r SET n = n + 1 WHERE id = 1;");
ok(poll_until($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE r%'"),
	'k1, holding key k\'s permit, waits for k2\'s row lock');
($out, $err) = sql2($k2,
	"SET deadlock_timeout = '100ms'; SELECT bulkhead_acquire_xact('d', '20s', 'k');");
like($err, qr/deadlock detected/,
	'k2\'s wait for key k, at its cap, behind k1 that waits for k2: 40P01, not a timeout');
sql($k2, "ROLLBACK");
($out, $err) = finish_async($k1);
is($err, '', 'k1 goes on once k2 has rolled back');
sql($k1, "COMMIT");

# 4. bulkhead.key as a connection option (DESIGN.md) is user input like
# any other: bytes that are not valid in the database's encoding are
# refused, not shown in bulkhead_activity and bulkhead_keys, where they
# would make every reader whose client encoding differs fail.
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('g', 5, 10, '60s');
	CREATE ROLE tenant LOGIN;
	ALTER ROLE tenant SET bulkhead.workload = 'g';
});
wait_loaded($node, 'g', 5);
$node->safe_psql('postgres',
	"CREATE DATABASE u8 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
$node->safe_psql('u8', 'CREATE EXTENSION bulkhead');
{
	local $ENV{PGOPTIONS} = "-c bulkhead.key=a\xffb";
	my ($ret, $o, $e) = $node->psql('u8',
		"SET client_encoding = 'LATIN1'; SELECT key FROM bulkhead_activity",
		extra_params => [ '-U', 'tenant' ]);
	like($e, qr/invalid value for parameter "bulkhead\.key"/,
		'a key not valid in the database encoding is refused at connection');
}

is( $node->safe_psql('postgres',
		"SELECT string_agg(workload || ' ' || running || '/' || queued, ', ' ORDER BY workload) FROM bulkhead_stats"),
	'b 0/0, d 0/0, g 0/0, s 0/0, sl 0/0', 'nothing left running or queued');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_keys'), '0', 'no key left in use');

close_session($_) for ($k1, $k2, $c1, $c2);
$node->stop;
done_testing();
