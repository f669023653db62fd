# 150_utility_gate.pl: utilities that commit internally hold their gate
# permit for their whole run.  CREATE INDEX CONCURRENTLY, VACUUM and the
# like go on in new transactions after their first commit; the automatic
# permit of a gated session must not go back at that first commit (which
# left the rest of the utility ungated), and it is counted once.  Its error
# and terminate paths return it.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('utility_gate');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('ddl', 1, 4, '60s');
	CREATE ROLE gated LOGIN;
	ALTER ROLE gated SET bulkhead.workload = 'ddl';
	CREATE SCHEMA gs AUTHORIZATION gated;
	ALTER ROLE gated SET search_path = gs;
	CREATE TABLE gs.t1 (v int);
	CREATE TABLE gs.t2 (v int);
	INSERT INTO gs.t1 SELECT g FROM generate_series(1, 2000) g;
	INSERT INTO gs.t2 SELECT g % 10 FROM generate_series(1, 2000) g;
	ALTER TABLE gs.t1 OWNER TO gated;
	ALTER TABLE gs.t2 OWNER TO gated;
	});
wait_loaded($node, 'ddl', 1);

sub gated_session
{
	my $s = $node->background_psql(
		'postgres',
		on_error_stop => 0,
		timeout => 60,
		extra_params => [ '-U', 'gated' ]);
	$s->set_query_timer_restart();
	return $s;
}

# "state/scope" of the gate permits of pid in bulkhead_activity
sub gate_rows
{
	my ($pid) = @_;
	return $node->safe_psql(
		'postgres', qq{
		SELECT coalesce(string_agg(state || '/' || scope, ','), '')
		  FROM bulkhead_activity WHERE pid = $pid AND workload = 'ddl'});
}

# wait until the statements of these pids have ended (before finish_async,
# whose marker query is a gated transaction of its own)
sub wait_idle
{
	my @pids = @_;
	my $list = join(',', @pids);
	ok( poll_until(
			$node,
			"SELECT bool_and(state = 'idle') FROM pg_stat_activity WHERE pid IN ($list)",
			30),
		"the statements of $list ended");
}

# acquired/released since $base, and running now
sub counts_since
{
	my ($base) = @_;
	my $st = stats($node, 'ddl');
	return ($st->{acquired} - $base->{acquired}) . '/'
	  . ($st->{released} - $base->{released}) . "/$st->{running}";
}

# wait until pid waits for a heavyweight lock
sub wait_for_lock_wait
{
	my ($pid, $what) = @_;
	ok( poll_until(
			$node,
			"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid",
			30),
		"$what waits for a lock");
}

my $holder = session($node);    # a superuser: exempt from the gate
my $g = gated_session();
my $q = gated_session();
my $gpid = sql($g, 'SELECT pg_backend_pid()');
my $qpid = sql($q, 'SELECT pg_backend_pid()');
my $base = stats($node, 'ddl');

#
# 1. CREATE INDEX CONCURRENTLY, held up after its internal commits by an
#    older snapshot: its permit is still held, so the budget of 1 makes the
#    next gated transaction queue.
#
sql($holder, 'BEGIN ISOLATION LEVEL REPEATABLE READ');
sql($holder, 'SELECT count(*) FROM gs.t1');
send_async($g, 'CREATE INDEX CONCURRENTLY t1_v ON t1 (v);');
wait_for_lock_wait($gpid, 'CREATE INDEX CONCURRENTLY');
is(gate_rows($gpid), 'running/auto',
	'CREATE INDEX CONCURRENTLY holds its permit past its internal commits');
send_async($q, 'SELECT count(*) FROM t2;');
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid AND state = 'queued'"
	),
	'another gated transaction queues behind it (the budget bounds the DDL)');
sql($holder, 'COMMIT');
wait_idle($gpid, $qpid);
is(counts_since($base), '2/2/0',
	'the utility counted once: two acquired, two released, none running');
my ($out, $err) = finish_async($g);
is($err, '', 'CREATE INDEX CONCURRENTLY completes');
($out, $err) = finish_async($q);
is("$out|$err", '2000|', 'the queued transaction runs after it');
ok( $node->safe_psql('postgres',
		"SELECT indisvalid FROM pg_index WHERE indexrelid = 'gs.t1_v'::regclass") eq 't',
	'the index is valid');

#
# 2. VACUUM of two tables, held up on the second one's lock after the first
#    one's transaction committed.
#
$base = stats($node, 'ddl');
sql($holder, 'BEGIN');
sql($holder, 'LOCK TABLE gs.t2 IN SHARE UPDATE EXCLUSIVE MODE');
send_async($g, 'VACUUM t1, t2;');
wait_for_lock_wait($gpid, 'VACUUM t1, t2');
is(gate_rows($gpid), 'running/auto', 'VACUUM holds its permit past the first table');
sql($holder, 'COMMIT');
wait_idle($gpid);
is(counts_since($base), '1/1/0', 'VACUUM counted once');
($out, $err) = finish_async($g);
is($err, '', 'VACUUM completes');

#
# 3. ANALYZE outside a transaction block commits per table too.
#
$base = stats($node, 'ddl');
sql($holder, 'BEGIN');
sql($holder, 'LOCK TABLE gs.t2 IN SHARE UPDATE EXCLUSIVE MODE');
send_async($g, 'ANALYZE t1, t2;');
wait_for_lock_wait($gpid, 'ANALYZE t1, t2');
is(gate_rows($gpid), 'running/auto', 'ANALYZE holds its permit past the first table');
sql($holder, 'COMMIT');
wait_idle($gpid);
is(counts_since($base), '1/1/0', 'ANALYZE counted once');
($out, $err) = finish_async($g);
is($err, '', 'ANALYZE completes');

#
# 4. A CREATE UNIQUE INDEX CONCURRENTLY that fails after its first commit
#    (t2 has duplicates): the abort returns the permit.
#
$base = stats($node, 'ddl');
($out, $err) = sql2($g, 'CREATE UNIQUE INDEX CONCURRENTLY t2_v ON t2 (v);');
like($err, qr/could not create unique index/, 'the unique index fails');
is(counts_since($base), '1/1/0', 'the failed utility returned its permit');
is(gate_rows($gpid), '', 'and holds nothing');
$node->safe_psql('postgres', 'DROP INDEX gs.t2_v');

#
# 5. A terminate while the utility waits returns the permit.
#
sql($holder, 'BEGIN');
sql($holder, 'LOCK TABLE gs.t2 IN SHARE UPDATE EXCLUSIVE MODE');
send_async($g, 'VACUUM t1, t2;');
wait_for_lock_wait($gpid, 'VACUUM before the terminate');
is(gate_rows($gpid), 'running/auto', 'VACUUM holds its permit');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($gpid)");
ok( poll_until(
		$node,
		"SELECT running = 0 AND acquired = released FROM bulkhead_stats WHERE workload = 'ddl'"
	),
	'the terminated utility\'s permit came back');
sql($holder, 'COMMIT');
close_session($g);

#
# 6. A procedure that commits keeps today's rule: a new permit per
#    transaction, none held between them (CALL and DO are not held over).
#
$node->safe_psql(
	'postgres', q{
	CREATE PROCEDURE two_xacts() LANGUAGE plpgsql AS $$
	BEGIN
	    PERFORM count(*) FROM gs.t1;
	    COMMIT;
	    PERFORM count(*) FROM gs.t1;
	END $$;
	GRANT EXECUTE ON PROCEDURE two_xacts() TO gated;
	});
$base = stats($node, 'ddl');
($out, $err) = sql2($q, 'CALL public.two_xacts();');
is($err, '', 'the procedure runs');
is(counts_since($base), '2/2/0',
	'a procedure that commits takes a permit per transaction');

close_session($q);
close_session($holder);
$node->stop;
done_testing();
