# 221_memory_grants.pl: memory grants (1.4) as processes see them.
#
#  1. A grant is returned on every path: the statement's end, an error, a
#     cancel, a terminate, an error caught in a subtransaction, a cursor's
#     close, a commit (a WITH HOLD cursor), the end of the session.
#  2. A statement that holds a grant never waits for another: a function's
#     query, when nothing is free, is granted what is free at once (shrunk
#     to work_mem's 64kB floor), within a statement_timeout far below the
#     memory_timeout.
#  3. A budget's max_memory bounds its children's grants; bulkhead.max_memory
#     bounds the server's, statements outside any workload included: they
#     never wait, they are granted what is free (only their floor while a
#     workload's statement waits).
#  4. A workload in shadow mode never waits: it is granted past its limit
#     and counts what would have waited.
#  5. A statement rule's move to another lane, then its grant there.
#  6. A utility's maintenance_work_mem: requested, cut to max_memory and
#     run with less (the index build sees the lowered value).
#
# Every session runs with work_mem = 1MB: a sorted function scan requests
# 2 MB (the scan's store and the Sort).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('memory_grants', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");
lane_functions($node);

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout, mode)
	VALUES ('mem_w', 8, 8, '60s', '4MB', '60s', 'enforce'),
	       ('mem_sh', 8, 8, '60s', '1MB', '60s', 'shadow'),
	       ('mem_b', 8, 8, '60s', '3MB', '60s', 'enforce'),
	       ('mem_u', 8, 8, '60s', '4MB', '60s', 'enforce');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('mem_c1', 4, 4, '60s', 'mem_b'), ('mem_c2', 4, 4, '60s', 'mem_b');
	CREATE TABLE mem_t (a int);
	INSERT INTO mem_t SELECT generate_series(1, 1000);
	-- the maintenance_work_mem an index build runs with, as a notice
	CREATE FUNCTION mwm_seen(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
	BEGIN
	    RAISE NOTICE 'maintenance_work_mem %', current_setting('maintenance_work_mem');
	    RETURN $1;
	END $$;
	-- a function whose query needs memory: the work_mem it ran with
	CREATE FUNCTION sorted_inside() RETURNS text LANGUAGE plpgsql AS $$
	DECLARE w text;
	BEGIN
	    SELECT max(current_setting('work_mem')) INTO w
	      FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s;
	    RETURN w;
	END $$;
});
wait_loaded($node, 'mem_c2', 4);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';
my $sorted_sleep =
  'SELECT pg_sleep(60), count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s;';

# granted/waiting/waits/shrunk of workload $w
sub mem
{
	my ($w) = @_;
	return $node->safe_psql('postgres',
		"SELECT memory_granted || '/' || memory_waiting || '/' || memory_waits || '/' || memory_shrunk"
		  . " FROM bulkhead_stats WHERE workload = '$w'");
}

# a session holding a transaction permit of $w
sub in_workload
{
	my ($w) = @_;
	my ($s, $pid) = verbose_session($node);
	is(sql($s, "BEGIN; SELECT bulkhead_acquire_xact('$w');"), '', "a session takes a permit of $w");
	return ($s, $pid);
}

sub state_of
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(workload || ' ' || state || ' ' || coalesce(memory_granted, -1), ','), 'none')"
		  . " FROM bulkhead_activity WHERE pid = $pid");
}

# --- 1. returned on every path ----------------------------------------------
{
	my ($s, $pid) = in_workload('mem_w');

	# the end of the statement
	is(sql($s, $sorted), '10', 'a sorted statement runs');
	is(mem('mem_w'), '0/0/0/0', 'its grant is returned at its end');

	# held while it runs; a cancel returns it
	send_async($s, $sorted_sleep);
	ok(poll_until($node, "SELECT memory_granted = 2097152 FROM bulkhead_stats WHERE workload = 'mem_w'"),
		'cancel: 2 MB granted while the statement runs');
	is(state_of($pid), 'mem_w running 2097152', 'cancel: the activity row shows the grant');
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	my ($out, $err) = finish_async($s);
	like($err, qr/57014/, 'cancel: the statement fails with 57014');
	is(mem('mem_w'), '0/0/0/0', 'cancel: the grant is returned');
	is(sql($s, "ROLLBACK; BEGIN; SELECT bulkhead_acquire_xact('mem_w');"), '', 'cancel: the session goes on');

	# an error in the statement
	($out, $err) = sql2($s,
		'SELECT count(*) FROM (SELECT 1 / (g - 5) AS x FROM generate_series(1, 10) g ORDER BY 1) s');
	like($err, qr/22012/, 'error: division by zero');
	is(mem('mem_w'), '0/0/0/0', 'error: the grant is returned');
	is(sql($s, "ROLLBACK; BEGIN; SELECT bulkhead_acquire_xact('mem_w');"), '', 'error: the session goes on');

	# an error caught in a subtransaction (a DO block's exception handler)
	($out, $err) = sql2($s, q{
		DO $$ BEGIN
		    BEGIN
		        PERFORM count(*) FROM (SELECT 1 / (g - 5) FROM generate_series(1, 10) g ORDER BY 1) s;
		    EXCEPTION WHEN division_by_zero THEN RAISE NOTICE 'caught';
		    END;
		END $$;});
	like($err, qr/NOTICE:.*caught/, 'subtransaction: an error caught in a DO block');
	is(mem('mem_w'), '0/0/0/0', 'subtransaction: the failed query\'s grant is returned');

	# a cursor holds its grant until it closes, or until the commit
	sql($s, "DECLARE c CURSOR FOR $sorted");
	is(mem('mem_w'), '2097152/0/0/0', 'cursor: held while open');
	sql($s, 'CLOSE c');
	is(mem('mem_w'), '0/0/0/0', 'cursor: returned at CLOSE');
	sql($s, "DECLARE h CURSOR WITH HOLD FOR $sorted");
	is(mem('mem_w'), '2097152/0/0/0', 'WITH HOLD cursor: held in its transaction');
	is(sql($s, 'COMMIT; FETCH 1 FROM h; CLOSE h;'), '10', 'WITH HOLD cursor: read after the commit');
	is(mem('mem_w'), '0/0/0/0', 'WITH HOLD cursor: returned when the commit persisted it');

	# a terminate
	sql($s, "BEGIN; SELECT bulkhead_acquire_xact('mem_w');");
	send_async($s, $sorted_sleep);
	ok(poll_until($node, "SELECT memory_granted = 2097152 FROM bulkhead_stats WHERE workload = 'mem_w'"),
		'terminate: 2 MB granted while the statement runs');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	ok(poll_until($node, "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid)"),
		'terminate: the backend is gone');
	is(mem('mem_w'), '0/0/0/0', 'terminate: the grant is returned');
	close_session($s);

	# the end of the session, a cursor open
	($s, $pid) = in_workload('mem_w');
	sql($s, "DECLARE c CURSOR FOR $sorted");
	is(mem('mem_w'), '2097152/0/0/0', 'exit: a cursor holds 2 MB');
	close_session($s);
	ok(poll_until($node, "SELECT memory_granted = 0 FROM bulkhead_stats WHERE workload = 'mem_w'"),
		'exit: the grant is returned when the session ends');
}

# --- 2. a statement that holds a grant never waits for another -------------
{
	my ($h) = in_workload('mem_w');
	sql($h, "DECLARE c CURSOR FOR $sorted");
	my ($s) = in_workload('mem_w');
	# the outer statement is granted the 2 MB left; each call's query
	# finds nothing free, and runs at the floor rather than waiting
	sql($s, "SET LOCAL statement_timeout = '20s'");
	my ($out, $err) = sql2($s,
		'SELECT sorted_inside() FROM (SELECT g FROM generate_series(1, 3) g ORDER BY g) s');
	is("$out$err", "64kB\n64kB\n64kB",
		'nested: each call\'s query ran at once, shrunk to 64kB');
	is(mem('mem_w'), '2097152/0/0/3', 'nested: no wait, three shrunk queries');
	sql($s, 'ROLLBACK');
	sql($h, 'ROLLBACK');
	is(mem('mem_w'), '0/0/0/3', 'nested: everything returned');
	close_session($_) for ($s, $h);
}

# --- 3. a budget's level, the server's level --------------------------------
{
	# mem_b (3 MB) above mem_c1 and mem_c2, which have no limit of their own
	my ($h) = in_workload('mem_c1');
	sql($h, "DECLARE c CURSOR FOR $sorted");
	my ($s, $pid) = in_workload('mem_c2');
	send_async($s, "$sorted;");
	ok( poll_until($node, qq{
			SELECT state = 'waiting for memory' FROM bulkhead_activity WHERE pid = $pid}),
		'budget: mem_c2\'s statement waits for the budget\'s memory');
	is($node->safe_psql('postgres', q{
			SELECT string_agg(workload || ' ' || memory_granted || ' ' || memory_waiting, ',' ORDER BY workload)
			  FROM bulkhead_stats WHERE workload LIKE 'mem\_%' AND parent = 'mem_b' OR workload = 'mem_b'}),
		'mem_b 2097152 1,mem_c1 2097152 0,mem_c2 0 1',
		'budget: the budget counts its subtree\'s grants and waiters');
	sql($h, 'CLOSE c');
	my ($out, $err) = finish_async($s);
	is("$out$err", '10', 'budget: granted once the sibling\'s cursor closed');
	sql($_, 'COMMIT') for ($h, $s);
	is(mem('mem_b'), '0/0/1/0', 'budget: nothing left granted; one wait counted');
	close_session($_) for ($s, $h);

	# bulkhead.max_memory = 3MB: statements outside any workload are
	# charged to the server (the observer's own queries too: they run at
	# work_mem's floor, never waiting)
	$node->safe_psql('postgres', "ALTER SYSTEM SET bulkhead.max_memory = '3MB'; SELECT pg_reload_conf();");
	ok(poll_until($node, "SELECT max_memory = '3MB' FROM bulkhead_memory"),
		'server: bulkhead.max_memory is 3MB');
	my $o = session($node);
	sql($o, "SET work_mem = '64kB'");
	my $x = session($node);
	sql($x, "BEGIN; DECLARE c CURSOR FOR $sorted;");
	my ($y, $ypid) = verbose_session($node);
	my $sorted_setting =
	  "SELECT max(current_setting('work_mem')) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s";
	my $counts = 'SELECT memory_waits || \'/\' || memory_shrunk FROM bulkhead_memory';
	my ($waits, $shrunk) = split m{/}, sql($o, $counts);
	is(sql($y, $sorted_setting), '512kB',
		'server: a statement outside any workload never waits: granted the 1 MB free, it runs at half its work_mem');
	is(sql($o, $counts), "$waits/" . ($shrunk + 1),
		'server: bulkhead_memory counts it shrunk, not waiting');
	my ($w, $wpid) = in_workload('mem_w');
	send_async($w, "$sorted;");
	ok( poll_until($node, qq{
			SELECT state = 'waiting for memory' FROM bulkhead_activity WHERE pid = $wpid}),
		'server: a workload\'s statement waits for the server\'s memory');
	like(sql($o, 'SELECT memory_waiting FROM bulkhead_memory'), qr/^1$/,
		'server: bulkhead_memory shows it waiting');
	is(sql($y, $sorted_setting), '64kB',
		'server: while a workload waits, a statement outside any takes only its floor, at once');
	sql($x, 'CLOSE c; COMMIT');
	($out, $err) = finish_async($w);
	is("$out$err", '10', 'server: the workload\'s statement is granted once the memory is returned');
	sql($w, 'COMMIT');
	ok(poll_until($node, "SET work_mem = '64kB'; SELECT memory_granted <= 65536 FROM bulkhead_memory"),
		'server: nothing left granted but the observer\'s own query');
	close_session($_) for ($o, $x, $y, $w);
	$node->safe_psql('postgres', "ALTER SYSTEM RESET bulkhead.max_memory; SELECT pg_reload_conf();");
	ok(poll_until($node, "SELECT max_memory IS NULL FROM bulkhead_memory"),
		'server: the server\'s limit is off again');
}

# --- 4. shadow mode ----------------------------------------------------------
{
	my ($h) = in_workload('mem_sh');
	sql($h, "DECLARE c CURSOR FOR $sorted");
	my ($s) = in_workload('mem_sh');
	is(sql($s, $sorted), '10', 'shadow: the second statement runs at once');
	is(sql($h, 'CLOSE c; COMMIT'), '', 'shadow: the first returns its grant');
	sql($s, 'COMMIT');
	is(mem('mem_sh'), '0/0/1/0', 'shadow: one statement would have waited, none shrunk');
	close_session($_) for ($s, $h);
}

# --- 5. a move to another lane, then its grant ------------------------------
{
	$node->safe_psql('postgres', q{
		INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_memory)
		VALUES ('web', 4, 4, '60s', '8MB'), ('heavy', 2, 4, '60s', '8MB');
		CREATE ROLE app LOGIN;
		GRANT pg_read_all_stats TO app;
		INSERT INTO bulkhead_rule (position, role, workload, min_cost)
		VALUES (1, 'app', 'web', NULL), (2, 'app', 'heavy', 100000);});
	wait_loaded($node, 'heavy', 2);
	ok(poll_until($node, q{
			SET bulkhead.exempt_superuser = off; SET ROLE app;
			SELECT workload = 'heavy' FROM bulkhead_classify('SELECT costly()')}),
		'move: the statement rules are loaded');
	my $s = session($node, 'postgres', 'app');
	my $pid = sql($s, 'SELECT pg_backend_pid()');
	is(sql($s, 'BEGIN; SELECT held();'), 'web/auto', 'move: the transaction starts in web');
	send_async($s,
		"SELECT costly(), pg_sleep(60), count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s;");
	ok(poll_until($node, qq{
			SELECT string_agg(workload || ' ' || state || ' ' || memory_granted, ',') = 'heavy running 2097152'
			  FROM bulkhead_activity WHERE pid = $pid}),
		'move: the costly statement moved to heavy and was granted its memory there');
	is($node->safe_psql('postgres',
			"SELECT string_agg(workload || ' ' || memory_granted, ',' ORDER BY workload) FROM bulkhead_stats WHERE workload IN ('web', 'heavy')"),
		'heavy 2097152,web 0', 'move: heavy counts the grant, web nothing');
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	finish_async($s);
	sql($s, 'ROLLBACK');
	is($node->safe_psql('postgres',
			"SELECT sum(memory_granted) FROM bulkhead_stats"),
		'0', 'move: nothing left granted anywhere');
	close_session($s);
}

# --- 6. a utility's maintenance_work_mem ------------------------------------
{
	my ($s) = in_workload('mem_u');
	sql($s, "SET LOCAL maintenance_work_mem = '16MB'; SET LOCAL max_parallel_maintenance_workers = 0;");
	my ($out, $err) = sql2($s, 'CREATE INDEX mem_t_seen ON mem_t (mwm_seen(a))');
	like($err, qr/NOTICE:.*maintenance_work_mem 4MB/,
		'utility: CREATE INDEX requests 16MB, cut to max_memory: built with 4MB');
	is(sql($s, 'COMMIT; SHOW maintenance_work_mem'), '64MB',
		'utility: the session\'s own value is back');
	is(mem('mem_u'), '0/0/0/1', 'utility: returned; counted as shrunk');
	close_session($s);
}

is($node->safe_psql('postgres', 'SELECT sum(memory_granted) FROM bulkhead_stats'),
	'0', 'at rest, nothing is granted in any workload');
is($node->safe_psql('postgres', 'SELECT memory_granted, memory_waiting FROM bulkhead_memory'),
	'0|0', 'nor at the server\'s level');

$node->stop;
done_testing();
