# 311_statements.pl: bulkhead_statements (1.4) beside pg_stat_statements.
# A role's transactions take the permits of lane 'web' (a rule), and a
# statement that costs much moves to 'heavy'.  What each statement met is
# counted per (queryid, workload) and joins pg_stat_statements on queryid:
# its calls (as many as pg_stat_statements counts), a wait and its time, a
# rejection (53B01), a timeout (53B02), a move (moved_in); a full table
# evicts its least used entries, never the most used; the reset empties it.
# A statement's memory request (the largest) and its runs shrunk to a
# workload's max_memory are counted too.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('statements', memory_request => 'limit',
	conf => "shared_preload_libraries = 'bulkhead, pg_stat_statements'\n"
	  . "compute_query_id = auto\n"
	  . "bulkhead.track_statements = on\n"
	  . "bulkhead.max_statements = 100\n");
lane_functions($node);
$node->safe_psql('postgres', q{
	CREATE EXTENSION pg_stat_statements;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('web', 1, 1, '30s'), ('heavy', 2, 2, '30s'), ('batch', 100, 0, '0');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_memory)
	VALUES ('mem', 4, 0, '0', '1MB');
	CREATE ROLE app LOGIN;
	INSERT INTO bulkhead_rule (position, role, workload) VALUES (1, 'app', 'web');
	INSERT INTO bulkhead_rule (position, role, workload, min_cost) VALUES (2, 'app', 'heavy', 100000);
	CREATE TABLE items (id int PRIMARY KEY, v int);
	INSERT INTO items SELECT g, g FROM generate_series(1, 100) g;
	GRANT SELECT ON items TO app;
	GRANT EXECUTE ON FUNCTION costly() TO app;
});
wait_loaded($node, 'web', 1);
wait_loaded($node, 'heavy', 2);
ok(poll_until($node, "SET ROLE app; SELECT workload = 'web' FROM bulkhead_classify()"),
	'the rules send app to web');
$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset(), bulkhead_statements_reset()');

# bulkhead_statements joined with pg_stat_statements for a query text
my $join = q{
	SELECT b.workload || ' calls ' || b.calls || ' (pgss ' || coalesce(p.calls, 0) || ') waits ' || b.waits
	       || ' rejected ' || b.rejected || ' timed_out ' || b.timed_out || ' moved_in ' || b.moved_in
	  FROM bulkhead_statements b
	  LEFT JOIN LATERAL (SELECT sum(calls) AS calls, min(query) AS query FROM pg_stat_statements s
	                      WHERE s.queryid = b.queryid) p ON true
	 WHERE p.query = %s ORDER BY b.workload};
sub figures
{
	my ($query) = @_;
	my $q = $query =~ s/'/''/gr;
	return $node->safe_psql('postgres', sprintf($join, "'$q'"));
}

# --- calls: as many as pg_stat_statements counts --------------------------
my $point = 'SELECT v FROM items WHERE id = $1';
my ($app, $app_pid) = verbose_session($node);
sql($app, 'SET ROLE app');
sql($app, "SELECT v FROM items WHERE id = $_") for 1 .. 7;
is(figures($point), 'web calls 7 (pgss 7) waits 0 rejected 0 timed_out 0 moved_in 0',
	'seven calls in web, as pg_stat_statements counts them');

# --- a wait, a rejection and a timeout in web (B = 1, Q = 1) -------------------
my ($holder) = verbose_session($node);
sql($holder, 'SET ROLE app');
sql($holder, 'BEGIN');
sql($holder, 'SELECT v FROM items WHERE id = 100');    # holds web's permit
send_async($app, 'SELECT v FROM items WHERE id = 8;');
ok(poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'web' AND state = 'queued'"),
	'a statement waits for web');
my ($third) = verbose_session($node);
sql($third, 'SET ROLE app');
like(sql($third, 'SELECT v FROM items WHERE id = 9'), qr/53B01/, 'another one is rejected');
sql($holder, 'COMMIT');
my (undef, $err) = finish_async($app);
is($err, '', 'the waiter ran');
is(figures($point), 'web calls 9 (pgss 9) waits 1 rejected 1 timed_out 0 moved_in 0',
	'the holder\'s call and the waiter\'s, its wait and the rejection: the same statement\'s (its queryid)');
cmp_ok($node->safe_psql('postgres', q{
		SELECT b.wait_time_total_ms FROM bulkhead_statements b
		  JOIN pg_stat_statements p USING (queryid)
		 WHERE p.query = 'SELECT v FROM items WHERE id = $1' AND b.workload = 'web'}),
	'>', 0, 'the wait has a time');

sql($holder, 'BEGIN');
sql($holder, 'SELECT v FROM items WHERE id = 100');
sql($third, 'RESET ROLE');
like(sql($third, "SELECT bulkhead_acquire('web', '100ms')"),
	qr/53B02/, 'an explicit acquire times out after its wait');
sql($holder, 'COMMIT');
# (pg_stat_statements counts a statement when it ends: a statement that
# only ever failed has no text there, so it runs once more, and succeeds)
sql($third, "SELECT bulkhead_acquire('web', '100ms')");
sql($third, "SELECT bulkhead_release('web')");
is(figures('SELECT bulkhead_acquire($1, $2)'),
	'web calls 0 (pgss 1) waits 1 rejected 0 timed_out 1 moved_in 0',
	'a timeout after a wait: one wait, one timeout');

# --- a move: a costly statement moves the transaction's permit to heavy ------
sql($app, 'BEGIN');
sql($app, 'SELECT v FROM items WHERE id = 10');
sql($app, 'SELECT costly()');
is(sql($app, "SELECT string_agg(workload || coalesce(' from ' || moved_from, ''), ',')"
		  . " FROM bulkhead_activity WHERE pid = pg_backend_pid()"),
	'heavy from web', 'the costly statement moved the permit to heavy');
sql($app, 'COMMIT');
is(figures('SELECT costly()'), 'heavy calls 1 (pgss 1) waits 0 rejected 0 timed_out 0 moved_in 1',
	'the move is counted in heavy, for the statement that moved');

# --- memory: the largest request, and the runs shrunk ------------------------
# work_mem 1MB, then 512kB: the sort and the function scan request 2 MB,
# then 1 MB; 'mem' has 1 MB, so the first run is cut to it (shrunk), the
# second fits
my ($memory) = verbose_session($node);
my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series($1, $2) g ORDER BY g DESC) s';
sql($memory, "SET max_parallel_workers_per_gather = 0; SELECT bulkhead_acquire('mem')");
sql($memory, "SET work_mem = '1MB'; " . ($sorted =~ s/\$1, \$2/1, 10/r));
sql($memory, "SET work_mem = '512kB'; " . ($sorted =~ s/\$1, \$2/1, 20/r));
sql($memory, "SELECT bulkhead_release('mem')");
is($node->safe_psql('postgres', qq{
		SELECT b.calls || ' ' || b.max_memory_requested || ' ' || b.shrunk
		  FROM bulkhead_statements b JOIN pg_stat_statements p USING (queryid)
		 WHERE p.query = '$sorted' AND b.workload = 'mem'}),
	'2 2097152 1', 'two calls in mem: the largest request (2 MB), one run shrunk');

# --- a full table evicts the least used entries ---------------------------
# 150 statements of distinct shapes (so distinct queryids), once each, while
# a session permit of batch is held: the table (100) fills and evicts, the
# point query (used 12 times) stays
my ($flood) = verbose_session($node);
sql($flood, "SELECT bulkhead_acquire('batch')");
sql($flood, 'SELECT 1' . (' + 1' x $_)) for 1 .. 150;
sql($flood, "SELECT bulkhead_release('batch')");
my $n = $node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_statements');
cmp_ok($n, '<=', 100, "the table holds at most bulkhead.max_statements entries ($n)");
cmp_ok($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_statements WHERE workload = 'batch'"),
	'>=', 50, 'the newest entries are kept');
like(figures($point), qr/^web calls 11 /, 'the most used entry is not evicted');

# --- queryid 0 is not counted; the reset empties the table -----------------
# (the reload reaches $app at its next command, or later: wait until it
# shows the new value, then reset what it counted meanwhile)
sql($flood, 'SET compute_query_id = off');
$node->safe_psql('postgres', 'ALTER SYSTEM SET compute_query_id = off');
$node->reload;
my $seen = '';
for (1 .. 200)
{
	$seen = sql($app, 'SHOW compute_query_id');
	last if $seen eq 'off';
	select(undef, undef, undef, 0.05);
}
is($seen, 'off', 'the session sees compute_query_id = off after the reload');
$node->safe_psql('postgres', 'SELECT bulkhead_statements_reset()');
sql($app, 'SELECT v FROM items WHERE id = 11');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_statements'), '0',
	'reset, and nothing counted without query identifiers');

close_session($_) for ($app, $holder, $third, $flood, $memory);
$node->stop;
done_testing();
