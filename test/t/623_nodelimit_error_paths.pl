# 623_nodelimit_error_paths.pl (review of issue 47, 1.5): error paths and
# executors that outlive their (sub)transaction, for the wrappers of
# nodelimit.c: after each, the session's work_mem and hash_mem_multiplier,
# no backend lost (find()'s FATAL), nothing granted or waiting at rest.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('nodelimit_error_paths',
	conf => "bulkhead.max_memory = '16MB'\nmax_parallel_workers_per_gather = 0\n"
	  . "autovacuum = off\njit = off\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('w', 8, 8, '60s', '8MB', '1s');
	CREATE ROLE plain LOGIN;
	ALTER ROLE plain SET bulkhead.workload = 'w';
	CREATE TABLE big AS SELECT g AS a, md5(g::text) AS b FROM generate_series(1, 50000) g;
	ANALYZE big;
	GRANT SELECT ON big TO plain;
	-- a SQL set-returning function run lazily in a select list: its
	-- statement (a sort) stays started across the outer cursor's FETCHes
	CREATE FUNCTION lazy_sorted() RETURNS SETOF text LANGUAGE sql AS
	  $$ SELECT b FROM big ORDER BY b $$;
	-- a statement with a sort nested inside a memory node's input, whose
	-- error is caught
	CREATE FUNCTION nested_caught(int) RETURNS int LANGUAGE plpgsql AS $$
	  DECLARE n int;
	  BEGIN
	    IF $1 % 10000 = 0 THEN
	      BEGIN
	        SELECT count(*) INTO n FROM (SELECT b, 1 / (a - 25000) FROM big ORDER BY b) s;
	      EXCEPTION WHEN division_by_zero THEN NULL;
	      END;
	    END IF;
	    RETURN $1;
	  END $$;
	CREATE FUNCTION spi_explain() RETURNS int LANGUAGE plpgsql AS $$
	  DECLARE r record; n int := 0;
	  BEGIN
	    FOR r IN EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT * FROM big ORDER BY b LOOP
	      n := n + 1;
	    END LOOP;
	    RETURN n;
	  END $$;
	CREATE PROCEDURE commit_loop() LANGUAGE plpgsql AS $$
	  DECLARE r record; n int := 0;
	  BEGIN
	    FOR r IN SELECT b FROM big ORDER BY b LIMIT 30 LOOP
	      n := n + 1;
	      IF n % 10 = 0 THEN COMMIT; END IF;
	    END LOOP;
	  END $$;
	CREATE PROCEDURE rollback_loop() LANGUAGE plpgsql AS $$
	  DECLARE r record; n int := 0;
	  BEGIN
	    FOR r IN SELECT b FROM big ORDER BY b LIMIT 30 LOOP
	      n := n + 1;
	      IF n % 10 = 0 THEN ROLLBACK; END IF;
	    END LOOP;
	  END $$;
	CREATE FUNCTION sql_sorted() RETURNS text LANGUAGE sql AS
	  $$ SELECT string_agg(b, ',' ORDER BY b) FROM (SELECT b FROM big ORDER BY b LIMIT 5) s $$;
});
wait_loaded($node, 'w', 8);

my $s = session($node, 'postgres', 'plain');
my $settings = "SELECT current_setting('work_mem') || ' ' || current_setting('hash_mem_multiplier');";
my $session = "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;";
sql($s, $session);

sub check
{
	my ($what) = @_;
	is(sql($s, $settings), '3MB 7', "$what: the session's settings after");
	is($node->safe_psql('postgres',
			"SELECT memory_granted FROM bulkhead_stats WHERE workload = 'w'"),
		'0', "$what: nothing granted at rest");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM bulkhead_activity WHERE state <> 'running'"),
		'0', "$what: no waiter");
	sql($s, $session);
}

my ($out, $err);

# 1. a lazily run SQL function's sort, started in a savepoint rolled back,
# its outer cursor fetched again
sql($s, 'BEGIN; DECLARE c CURSOR FOR SELECT lazy_sorted(); SAVEPOINT a;');
($out, $err) = sql2($s, 'FETCH 1 FROM c');
is($err, '', 'a FETCH in a savepoint starts the function\'s sort');
sql($s, 'ROLLBACK TO SAVEPOINT a;');
($out, $err) = sql2($s, 'FETCH 2 FROM c');
is($err, '', 'the cursor fetched again after the rollback (no FATAL)');
sql($s, 'COMMIT;');
check('a lazy SQL function started in a savepoint rolled back');

# the same, the function started at the top, run on in a savepoint
sql($s, 'BEGIN; DECLARE c CURSOR FOR SELECT lazy_sorted(); FETCH 1 FROM c; SAVEPOINT a; FETCH 1 FROM c; ROLLBACK TO SAVEPOINT a;');
($out, $err) = sql2($s, 'FETCH 2 FROM c');
is($err, '', 'fetched after a rollback of a savepoint it ran in');
sql($s, 'COMMIT;');
check('a lazy SQL function run on in a savepoint');

# 2. a cursor whose FETCH fails in a savepoint, then used again
sql($s, 'BEGIN; DECLARE c SCROLL CURSOR FOR SELECT b, 1 / (a - 40000) FROM big ORDER BY b; SAVEPOINT a;');
($out, $err) = sql2($s, 'FETCH ALL FROM c');
like($err, qr/division by zero/, 'a FETCH fails inside the cursor\'s sort');
sql($s, 'ROLLBACK TO SAVEPOINT a;');
($out, $err) = sql2($s, 'FETCH 1 FROM c');
like($err, qr/cannot|portal|failed/, 'the failed cursor cannot run again');
sql($s, 'ROLLBACK;');
check('a cursor failed in a savepoint');

# a cursor whose FETCH succeeded before a savepoint rolled back
sql($s, 'BEGIN; DECLARE c SCROLL CURSOR FOR SELECT b FROM big ORDER BY b; SAVEPOINT a; FETCH 5 FROM c; ROLLBACK TO SAVEPOINT a;');
($out, $err) = sql2($s, 'FETCH BACKWARD 2 FROM c; FETCH 100 FROM c; MOVE ABSOLUTE 0 IN c; FETCH 1 FROM c');
is($err, '', 'a cursor run in a savepoint rolled back runs on');
sql($s, 'COMMIT;');
check('a cursor run in a savepoint rolled back');

# 3. WITH HOLD cursors, portals across transactions
sql($s, 'BEGIN; DECLARE h CURSOR WITH HOLD FOR SELECT b FROM big ORDER BY b; FETCH 3 FROM h; COMMIT;');
($out, $err) = sql2($s, 'FETCH 3 FROM h; CLOSE h;');
is($err, '', 'a WITH HOLD cursor fetched after its commit');
check('a WITH HOLD cursor');

# a WITH HOLD cursor failing while it is persisted at commit
sql($s, 'BEGIN; DECLARE h CURSOR WITH HOLD FOR SELECT b, 1 / (a - 40000) FROM big ORDER BY b DESC;');
($out, $err) = sql2($s, 'COMMIT;');
like($err, qr/division by zero/, 'a WITH HOLD cursor fails at its commit');
check('a WITH HOLD cursor failing at commit');

# 4. a statement nested in a memory node's input, its error caught
($out, $err) = sql2($s, 'SELECT count(*) FROM (SELECT b, nested_caught(a) FROM big ORDER BY b) s');
is($out, '50000', 'the outer sort runs on after a nested sort failed and was caught');
check('a nested statement\'s error caught inside a memory node');

# 5. EXPLAIN ANALYZE through SPI, in a memory node's input
($out, $err) = sql2($s, 'SELECT count(*) FROM (SELECT b, CASE WHEN a = 1 THEN spi_explain() END FROM big ORDER BY b) s');
is($err, '', 'EXPLAIN ANALYZE run inside a sort\'s input');
check('EXPLAIN ANALYZE through SPI');

# 6. procedures with COMMIT / ROLLBACK inside a FOR loop over a sorted query
($out, $err) = sql2($s, 'CALL commit_loop()');
is($err, '', 'COMMIT inside a FOR loop over a sort');
check('a procedure committing inside its FOR loop');
($out, $err) = sql2($s, 'CALL rollback_loop()');
is($err, '', 'ROLLBACK inside a FOR loop over a sort');
check('a procedure rolling back inside its FOR loop');

# 7. a SQL function's sort inside another sort's input; rescans; a
# prepared statement's generic plan run several times
($out, $err) = sql2($s, 'SELECT count(DISTINCT x) FROM (SELECT sql_sorted() AS x, b FROM big WHERE a < 50 ORDER BY b) s');
is($out, '1', 'a SQL function\'s sort inside another sort');
($out, $err) = sql2($s, 'SET enable_hashjoin = off; SET enable_mergejoin = off;'
	  . 'SELECT count(*) FROM (SELECT a FROM big WHERE a < 20) o, LATERAL (SELECT b FROM big i WHERE i.a < 2000 ORDER BY b LIMIT 1 OFFSET o.a) x;'
	  . 'RESET enable_hashjoin; RESET enable_mergejoin;');
is($out, '19', 'a sort rescanned under a nested loop') or diag($err);
sql($s, "SET plan_cache_mode = force_generic_plan; PREPARE p(int) AS SELECT count(*) FROM (SELECT b FROM big WHERE a > \$1 ORDER BY b) s;");
($out, $err) = sql2($s, 'EXECUTE p(1); EXECUTE p(2); EXECUTE p(3);');
is($out, "49999\n49998\n49997", 'a prepared statement run three times');
sql($s, 'DEALLOCATE p; RESET plan_cache_mode;');
check('nested, rescanned and prepared sorts');

# 8. the session survived all of it
is(sql($s, 'SELECT 1'), '1', 'the session is alive (no FATAL)');
close_session($s);
my $log = slurp_file($node->logfile);
unlike($log, qr/FATAL|lost its node|PANIC|server process .* terminated/,
	'no FATAL, PANIC or crash in the server log');

done_testing();
