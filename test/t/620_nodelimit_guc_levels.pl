# 620_nodelimit_guc_levels.pl (review of issue 47, 1.5): a memory node's
# wrapper (nodelimit.c) writes work_mem and hash_mem_multiplier straight
# into the variables; a GUC nesting level pushed inside the wrapper's call
# saves the wrapper's values as its "prior".  An abort puts back the
# session's values in the xact/subxact callback, then the GUC machinery
# pops that level and writes the wrapper's values back: the session is
# left with work_mem = the node's grant and hash_mem_multiplier = 1.
#
# Levels pushed inside a node's call by a plain role:
#  - a function with a SET clause (fmgr_security_definer), erroring;
#  - set_config(..., true) (SET LOCAL) at the transaction's level, whose
#    prior is restored at the transaction's end, even a commit;
#  - set_config(..., false) then ROLLBACK (prior restored).
# (Both set_config cases pass: the statement's caps level holds them.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('nodelimit_guc_levels',
	conf => "bulkhead.max_memory = '16MB'\nmax_parallel_workers_per_gather = 0\n"
	  . "autovacuum = off\njit = off\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('w', 8, 8, '60s', '8MB', '1s');
	CREATE ROLE plain LOGIN;
	ALTER ROLE plain SET bulkhead.workload = 'w';
	CREATE TABLE big AS SELECT g AS a, md5(g::text) AS b FROM generate_series(1, 200000) g;
	ANALYZE big;
	GRANT SELECT ON big TO plain;
	-- a function with a SET clause: a GUC level of its own per call
	CREATE FUNCTION boom(int) RETURNS int LANGUAGE plpgsql
	  SET work_mem = '2MB' AS $$
	  BEGIN IF $1 = 150000 THEN RAISE EXCEPTION 'boom'; END IF; RETURN $1; END $$;
	CREATE FUNCTION boom_hm(int) RETURNS int LANGUAGE plpgsql
	  SET hash_mem_multiplier = 3 AS $$
	  BEGIN IF $1 = 150000 THEN RAISE EXCEPTION 'boom'; END IF; RETURN $1; END $$;
});
wait_loaded($node, 'w', 8);

my $s = session($node, 'postgres', 'plain');
my $settings = "SELECT current_setting('work_mem') || ' ' || current_setting('hash_mem_multiplier');";
sql($s, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");
is(sql($s, $settings), '3MB 7', 'the session\'s settings');

# the sort is a memory node of a granted statement
my $plan = sql($s, 'EXPLAIN (COSTS OFF) SELECT b FROM big WHERE boom(a) > 0 ORDER BY b');
like($plan, qr/Sort/, 'a sort above the scan that calls boom()');

sub at_rest
{
	my ($what) = @_;
	is($node->safe_psql('postgres',
			"SELECT memory_granted FROM bulkhead_stats WHERE workload = 'w'"),
		'0', "nothing granted at rest after $what");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM bulkhead_activity WHERE state <> 'running'"),
		'0', "no waiter after $what");
}

# 1. an error inside a function with a SET clause, inside the sort's call:
# the transaction's abort
my ($out, $err) = sql2($s, 'SELECT b FROM big WHERE boom(a) > 0 ORDER BY b LIMIT 1');
like($err, qr/boom/, 'an error inside the sort\'s input, in a function with SET work_mem');
is(sql($s, $settings), '3MB 7',
	'after it, work_mem and hash_mem_multiplier are the session\'s (not the sort\'s grant and 1)');
sql($s, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");
at_rest('an error in a function with SET work_mem');

($out, $err) = sql2($s, 'SELECT b FROM big WHERE boom_hm(a) > 0 ORDER BY b LIMIT 1');
like($err, qr/boom/, 'an error inside the sort\'s input, in a function with SET hash_mem_multiplier');
is(sql($s, $settings), '3MB 7',
	'after it, hash_mem_multiplier is the session\'s 7 (not the wrapper\'s 1)');
sql($s, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");

# 2. the same in a savepoint rolled back
sql($s, 'BEGIN; SAVEPOINT a;');
($out, $err) = sql2($s, 'SELECT b FROM big WHERE boom(a) > 0 ORDER BY b LIMIT 1');
like($err, qr/boom/, 'the error in a savepoint');
sql($s, 'ROLLBACK TO SAVEPOINT a;');
is(sql($s, $settings), '3MB 7', 'after ROLLBACK TO SAVEPOINT, the session\'s settings');
sql($s, 'COMMIT;');
is(sql($s, $settings), '3MB 7', 'and after the COMMIT');
sql($s, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");
at_rest('an error in a savepoint');

# 3. set_config(..., true) (SET LOCAL) inside the sort's call, committed
sql($s, 'BEGIN;');
sql($s, "SELECT count(*) FROM (SELECT b FROM big WHERE set_config('work_mem', '5MB', true) IS NOT NULL ORDER BY b) s;");
sql($s, 'COMMIT;');
is(sql($s, $settings), '3MB 7',
	'after a SET LOCAL made inside a sort\'s input and the COMMIT, the session\'s settings');
sql($s, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");

# 4. set_config(..., false) inside the sort's call, rolled back
sql($s, 'BEGIN;');
sql($s, "SELECT count(*) FROM (SELECT b FROM big WHERE set_config('work_mem', '5MB', false) IS NOT NULL ORDER BY b) s;");
sql($s, 'ROLLBACK;');
is(sql($s, $settings), '3MB 7',
	'after a SET made inside a sort\'s input and a ROLLBACK, the session\'s settings');
sql($s, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");

at_rest('the set_config cases');

close_session($s);
done_testing();
