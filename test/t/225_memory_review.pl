# 225_memory_review.pl: defects found by the 1.4 review in memory grants.
# Each subtest FAILS on the code it was written against; its name says
# the defect.  Every session runs with work_mem = 1MB: a sorted function
# scan requests 2 MB (the scan's store and the Sort), as in TAP 221.
#
#  1. work_mem_raised_after_grant: a plain role raises work_mem after its
#     statement was granted (set_config in an init plan of the statement;
#     SET between DECLARE and FETCH): the Sort and the function scan's
#     store begin at run time with the raised value, far beyond the grant.
#     Fixed for a SET between phases (each phase runs with the values the
#     grant was worked out with); a set_config() inside a phase, beyond
#     reach in 1.4, is fixed by 1.5's per-node limits (each memory node
#     runs with its grant, set around its own calls).
#  2. cursor_fetch_error_in_savepoint: a cursor whose FETCH failed in a
#     savepoint keeps its grant after CLOSE, until the transaction ends.
#  3. budget_move_leaves_grants_behind: a child re-parented (or its budget
#     renamed) while a statement of it holds a grant: the old budget keeps
#     counting it, the new one does not, and admits past its max_memory.
#  4. generic_plan_after_shrunk_statement: a cached plan (extended
#     protocol, no planning) that starts after a shrunk statement of the
#     same transaction computes its request at the shrunk work_mem still
#     in force, then runs at the session's work_mem: it runs past its
#     grant and past max_memory, and is not counted as shrunk.
#  5. classify_reports_callers_shrunk_work_mem: bulkhead_classify(query)
#     reads the live work_mem, which its calling statement's own shrink (or
#     the frame of the current lane's caps) lowered: it answers for work_mem
#     = 64kB instead of the work_mem the query would run with.
#  6. alter_table_index_build_not_charged: ALTER TABLE ADD PRIMARY KEY /
#     UNIQUE builds its index with maintenance_work_mem (DefineIndex, not
#     through ProcessUtility): no grant, while CREATE TABLE (id int PRIMARY
#     KEY) on an empty table (an IndexStmt subcommand) is charged
#     maintenance_work_mem.  A table owner builds any index unbounded.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('memory_review', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");

$node->safe_psql('postgres', q{
	CREATE ROLE plain LOGIN;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('rv_w', 8, 8, '60s', '8MB', '60s'),
	       ('rv_p', 8, 8, '60s', '3MB', '60s'),
	       ('rv_q', 8, 8, '60s', '3MB', '60s'),
	       ('rv_one', 8, 8, '60s', '1MB', '0s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('rv_c', 4, 4, '60s', 'rv_p'), ('rv_e', 4, 4, '60s', 'rv_q');
	ALTER ROLE plain SET bulkhead.workload = 'rv_w';
	CREATE TABLE rv_seen (stmt text, wm text);
	GRANT ALL ON rv_seen TO plain;
});
wait_loaded($node, 'rv_e', 4);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';

# memory_granted of workload $w, read by the (exempt) superuser
sub granted
{
	my ($w) = @_;
	return $node->safe_psql('postgres',
		"SELECT memory_granted FROM bulkhead_stats WHERE workload = '$w'");
}

# --- 1. work_mem raised after the grant --------------------------------------
{
	my $s = session($node, 'postgres', 'plain');
	is(sql($s, 'SELECT workload FROM bulkhead_classify()'), 'rv_w', 'plain runs in rv_w');

	# one statement: an init plan raises work_mem before the Sort begins
	my $plan = sql($s, q{
		EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
		SELECT count(*) FROM (SELECT g FROM generate_series(1, 300000) g ORDER BY g DESC) s
		 WHERE (SELECT set_config('work_mem', '1GB', false)) IS NOT NULL});
	my ($sort_kb) = $plan =~ /Sort Method: quicksort\s+Memory: (\d+)kB/;
	$sort_kb //= 0;
	# (1.4 left this beyond reach; 1.5 sets each memory node's limit around
	# its own calls, whatever a set_config() inside the phase did)
	cmp_ok($sort_kb, '<=', 2048,
		'work_mem_raised_after_grant: a statement granted 2 MB sorts in at most 2 MB '
		  . '(set_config in its init plan)');

	close_session($s);

	# a cursor: granted at DECLARE, its Sort begins at the first FETCH (a
	# superuser in rv_w, to read pg_backend_memory_contexts)
	$s = session($node);
	sql($s, "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'rv_w'");
	sql($s, 'BEGIN');
	sql($s, q{DECLARE c CURSOR FOR
		SELECT g, repeat('x', 100) FROM generate_series(1, 300000) g ORDER BY g DESC});
	is(granted('rv_w'), '2097152', 'work_mem_raised_after_grant: the cursor is granted 2 MB');
	sql($s, "SET work_mem = '1GB'");
	sql($s, 'FETCH 1 FROM c');
	my $used = sql($s, q{
		SELECT sum(total_bytes) FROM pg_backend_memory_contexts
		 WHERE name IN ('TupleSort main', 'TupleSort sort', 'ExecutorState')});
	cmp_ok($used, '<=', 2 * 2097152,
		'work_mem_raised_after_grant: the cursor granted 2 MB uses at most '
		  . 'about 2 MB after SET work_mem (with slack)');
	sql($s, 'COMMIT');
	close_session($s);
}

# --- 2. a cursor whose FETCH failed in a savepoint ---------------------------
{
	my $s = session($node, 'postgres', 'plain');
	sql($s, 'BEGIN');
	sql($s, q{DECLARE c CURSOR FOR
		SELECT 1 / (g - 5000) FROM generate_series(1, 10000) g ORDER BY g DESC});
	is(granted('rv_w'), '2097152', 'cursor_fetch_error_in_savepoint: the cursor holds 2 MB');
	sql($s, 'SAVEPOINT a');
	my ($out, $err) = sql2($s, 'FETCH 10 FROM c');
	like($err, qr/division by zero/, 'cursor_fetch_error_in_savepoint: the FETCH fails');
	sql($s, 'ROLLBACK TO a');
	sql($s, 'CLOSE c');
	is(granted('rv_w'), '0',
		'cursor_fetch_error_in_savepoint: CLOSE returns the grant (the transaction goes on)');
	sql($s, 'COMMIT');
	is(granted('rv_w'), '0', 'cursor_fetch_error_in_savepoint: nothing left at the commit');
	close_session($s);
}

# --- 3. a child moved to another budget while it holds a grant ---------------
{
	# rv_c under rv_p (3 MB) holds 2 MB through a cursor
	my $h = session($node);
	sql($h, "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'rv_c'");
	sql($h, "BEGIN; DECLARE c CURSOR FOR $sorted;");
	is(granted('rv_p'), '2097152', 'budget_move_leaves_grants_behind: rv_p counts rv_c\'s 2 MB');

	$node->safe_psql('postgres', "UPDATE bulkhead_workload SET parent = 'rv_q' WHERE name = 'rv_c'");
	ok(poll_until($node, "SELECT parent = 'rv_q' FROM bulkhead_stats WHERE workload = 'rv_c'"),
		'budget_move_leaves_grants_behind: rv_c is under rv_q');
	is(granted('rv_q') . ' ' . granted('rv_p'), '2097152 0',
		'budget_move_leaves_grants_behind: rv_q counts its subtree\'s 2 MB, rv_p nothing');

	# rv_e (under rv_q, 3 MB) asks for 2 MB: 2 + 2 > 3, it must wait
	my ($s, $pid) = verbose_session($node);
	sql($s, "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'rv_e'");
	sql($s, 'BEGIN');
	send_async($s, "SELECT pg_sleep(1), count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s;");
	ok( poll_until($node, qq{
			SELECT count(*) = 1 FROM bulkhead_activity
			 WHERE pid = $pid AND (state = 'waiting for memory' OR memory_granted > 0)}),
		'budget_move_leaves_grants_behind: rv_e\'s statement started or waits');
	is($node->safe_psql('postgres',
			"SELECT state FROM bulkhead_activity WHERE pid = $pid"),
		'waiting for memory',
		'budget_move_leaves_grants_behind: rv_e waits, rv_q\'s subtree would pass 3 MB');
	sql($h, 'CLOSE c; COMMIT');
	finish_async($s);
	sql($s, 'COMMIT');
	close_session($_) for ($s, $h);
	ok(poll_until($node, q{
			SELECT sum(memory_granted) = 0 FROM bulkhead_stats WHERE workload LIKE 'rv\_%'}),
		'budget_move_leaves_grants_behind: nothing granted at rest');

	# the budget renamed: its children's grants stay with the old name
	$h = session($node);
	sql($h, "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'rv_e'");
	sql($h, "BEGIN; DECLARE c CURSOR FOR $sorted;");
	$node->safe_psql('postgres', "UPDATE bulkhead_workload SET name = 'rv_q2' WHERE name = 'rv_q'");
	ok(poll_until($node, "SELECT parent = 'rv_q2' FROM bulkhead_stats WHERE workload = 'rv_e'"),
		'budget_move_leaves_grants_behind: rv_q renamed rv_q2');
	is(granted('rv_q2'), '2097152',
		'budget_move_leaves_grants_behind: the renamed budget counts its subtree\'s 2 MB');
	sql($h, 'CLOSE c; COMMIT');
	close_session($h);
}

# --- 4. a cached plan after a shrunk statement -------------------------------
{
	# rv_one: max_memory 1MB, memory_timeout 0: each 2 MB statement is cut
	# to 1 MB (work_mem 512kB).  Both statements are the same; B follows A
	# in A's transaction and, from its second run, starts from a generic
	# plan without planning.
	$node->safe_psql('postgres', q{
		CREATE ROLE gen LOGIN;
		ALTER ROLE gen SET bulkhead.workload = 'rv_one';
		ALTER ROLE gen SET plan_cache_mode = force_generic_plan;
		GRANT ALL ON rv_seen TO gen;});
	my $script = $node->basedir . '/generic.sql';
	append_to_file($script, q{BEGIN;
INSERT INTO rv_seen SELECT 'A', max(current_setting('work_mem')) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s;
INSERT INTO rv_seen SELECT 'B', max(current_setting('work_mem')) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s;
COMMIT;
});
	my $shrunk_before = $node->safe_psql('postgres',
		"SELECT memory_shrunk FROM bulkhead_stats WHERE workload = 'rv_one'");
	$node->command_ok(
		[
			'pgbench', '-n', '-M', 'prepared', '-c', '1', '-t', '4', '-f', $script,
			'-h', $node->host, '-p', $node->port, '-U', 'gen', 'postgres'
		],
		'generic_plan_after_shrunk_statement: pgbench runs A then B four times');
	is($node->safe_psql('postgres',
			"SELECT string_agg(DISTINCT stmt || ' ' || wm, ', ') FROM rv_seen"),
		'A 512kB, B 512kB',
		'generic_plan_after_shrunk_statement: B, cut to 1 MB as A, runs at 512kB');
	is($node->safe_psql('postgres',
			"SELECT memory_shrunk - $shrunk_before FROM bulkhead_stats WHERE workload = 'rv_one'"),
		'8',
		'generic_plan_after_shrunk_statement: all eight statements counted as shrunk');
}

# --- 5. bulkhead_classify(query) from a statement that was itself shrunk ------
{
	# rv_cl: 2MB; a cursor holds it all; the statement that calls
	# bulkhead_classify (a function scan: work_mem) may not wait (its
	# backend holds a grant) and runs shrunk to 64kB: the answer follows
	$node->safe_psql('postgres', q{
		INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
		                               max_memory, memory_timeout)
		VALUES ('rv_cl', 8, 8, '60s', '2MB', '60s');});
	wait_loaded($node, 'rv_cl', 8);
	my $s = session($node);
	sql($s, "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'rv_cl'");
	my $classify = "SELECT memory_requested FROM bulkhead_classify('$sorted')";
	is(sql($s, $classify), '2097152', 'classify_reports_callers_shrunk_work_mem: 2 MB at rest');
	sql($s, "BEGIN; DECLARE c CURSOR FOR $sorted;");
	is(sql($s, $classify), '2097152',
		'classify_reports_callers_shrunk_work_mem: still 2 MB while the caller\'s own statement runs shrunk');
	sql($s, 'COMMIT');
	close_session($s);
}

# --- 6. an index built by ALTER TABLE --------------------------------------
{
	# rv_ddl: 8MB; maintenance_work_mem 64MB: an index build is cut to 8MB
	$node->safe_psql('postgres', q{
		INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
		                               max_memory, memory_timeout)
		VALUES ('rv_ddl', 8, 8, '60s', '8MB', '60s');
		CREATE TABLE rv_big AS SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 100000) g;});
	wait_loaded($node, 'rv_ddl', 8);
	my $shrunk = sub {
		return $node->safe_psql('postgres',
			"SELECT memory_shrunk FROM bulkhead_stats WHERE workload = 'rv_ddl'");
	};
	my $s = session($node);
	sql($s, "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'rv_ddl'; SET maintenance_work_mem = '64MB';");
	my $before = $shrunk->();
	sql($s, 'CREATE UNIQUE INDEX rv_big_t ON rv_big (t)');
	is($shrunk->() - $before, 1, 'alter_table_index_build_not_charged: CREATE INDEX is cut to 8MB');
	$before = $shrunk->();
	sql($s, 'ALTER TABLE rv_big ADD PRIMARY KEY (id)');
	is($shrunk->() - $before, 1,
		'alter_table_index_build_not_charged: the same build by ALTER TABLE ADD PRIMARY KEY is cut too');
	close_session($s);
}

done_testing();
