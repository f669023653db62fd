# 215_lane_review.pl: what a review of 1.3's statement rules found, each a
# case that failed before its fix.
#
#   1. A deferred foreign-key check that runs at COMMIT is no statement of
#      the client: it is not matched (a rule on 'select' sent it to a full
#      lane: the COMMIT failed with 53B01); nor are the queries of a
#      function that EXECUTE's parameters call.
#   2. A plan the user may not run is not matched: the lane it would take
#      would tell its cost, so the statistics pg_stats hides.
#   3. The queries the planner runs for the first statement (a STABLE
#      function it evaluates) take no permit of the session's workload
#      before the statement is matched.
#   4. The extended protocol: a statement matched when planned (a Bind) is
#      not matched again with the cost of its plan made under the lane's
#      caps; a generic plan built only to compare costs (the sixth
#      execution of a prepared statement) is not matched.
#   5. A permit that max_hold moved is followed before a statement moves
#      it: moved_from names where it was, and that workload counts the
#      move out.
#   6. A statement that commits internally (ALTER DATABASE ... SET
#      TABLESPACE) under a lane's caps leaves the GUC nesting levels sound.
#   7. Budgets count a statement's move as a move.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('lane_review');
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	GRANT CREATE ON SCHEMA public TO app;
	CREATE TABLE big AS SELECT g AS id, g % 1000 AS c, md5(g::text) AS note
	  FROM generate_series(1, 200000) g;
	ANALYZE big;
	GRANT SELECT ON big TO app;
	CREATE TABLE secret AS SELECT g AS id, (g % 100000) AS salary
	  FROM generate_series(1, 200000) g;
	ANALYZE secret;
	CREATE TABLE parent (id int PRIMARY KEY);
	INSERT INTO parent SELECT generate_series(1, 10);
	CREATE TABLE child (id int, pid int REFERENCES parent DEFERRABLE INITIALLY DEFERRED);
	GRANT ALL ON parent, child TO app;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, settings)
	VALUES ('web', 2, 4, '2s', NULL),
	       ('reads', 1, 0, '0', NULL),
	       ('heavy', 1, 4, '5s', '{work_mem=1MB,max_parallel_workers_per_gather=0}'),
	       ('huge', 1, 4, '5s', NULL),
	       ('slowlane', 4, 4, '5s', NULL);
	INSERT INTO bulkhead_rule (position, role, workload) VALUES (100, 'app', 'web');
	INSERT INTO bulkhead_rule (position, role, command, workload)
	VALUES (5, 'app', '{select}', 'reads');
});
wait_classified($node, 'app', 'web');

# the counters of workload $w: "acquired/released/moved_out/moved_in/running"
sub counts
{
	my ($w) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT acquired || '/' || released || '/' || moved_out || '/' ||
		       moved_in || '/' || running
		  FROM bulkhead_stats WHERE workload = '$w'});
}

sub reset_stats
{
	$node->safe_psql('postgres', 'SELECT bulkhead_stats_reset()');
}

# 1. a deferred check at COMMIT is not the client's statement
my ($holder) = verbose_session($node);
sql($holder, "SELECT bulkhead_acquire('reads')");
reset_stats();
my ($app, $app_pid) = verbose_session($node);
sql($app, 'SET ROLE app');
my ($out, $err) = sql2($app, q{
	BEGIN;
	INSERT INTO child VALUES (2, 2);
	COMMIT;});
is($err, '', 'a COMMIT that checks a deferred foreign key does not fail for the lane of select');
is(counts('reads'), '0/0/0/0/1', 'the check at commit took no permit of reads (held by another)');
is(counts('web'), '1/1/0/0/0', 'the transaction ran in web, and nothing moved');
sql($holder, "SELECT bulkhead_release('reads')");
$node->safe_psql('postgres', 'DELETE FROM bulkhead_rule WHERE position = 5');

# the queries of a function that EXECUTE's parameters call
$node->safe_psql('postgres', q{
	CREATE FUNCTION costly() RETURNS int LANGUAGE plpgsql AS
	  'BEGIN RETURN (SELECT count(*) FROM big a, big b WHERE a.id < 300 AND b.id < 300); END';
	GRANT EXECUTE ON FUNCTION costly() TO app;
	INSERT INTO bulkhead_rule (position, min_cost, workload) VALUES (2, 20000, 'heavy');});
ok(poll_until($node, q{SET ROLE app;
	SELECT workload = 'heavy' FROM bulkhead_classify('SELECT count(*) FROM (SELECT note FROM big ORDER BY note OFFSET 0) s')}),
	'the rule on cost is loaded');
reset_stats();
($out, $err) = sql2($app, q{
	PREPARE q(int) AS INSERT INTO child VALUES ($1, NULL);
	BEGIN;
	EXECUTE q(costly());
	SELECT workload FROM bulkhead_activity WHERE pid = pg_backend_pid();
	COMMIT;
	DEALLOCATE q;});
is($out, 'web', 'EXECUTE runs in the lane of what it runs, not of the queries its parameters make');
is($err, '', 'without an error');
is(counts('heavy'), '0/0/0/0/0', 'heavy took nothing');

# 2. a plan the user may not run is not matched
reset_stats();
($out, $err) = sql2($app, q{
	BEGIN;
	SELECT 1;
	SAVEPOINT a;
	SELECT * FROM secret WHERE salary > 10 ORDER BY salary;
	ROLLBACK TO a;
	SELECT workload FROM bulkhead_activity WHERE pid = pg_backend_pid();
	COMMIT;});
is($out, "1\nweb", 'after a query on a table it may not read, the transaction is still in web');
like($err, qr/permission denied for table secret/, 'the query failed for its privileges');
is(counts('heavy'), '0/0/0/0/0', 'the lane of its cost was not taken, nor waited for');

# 3. the planner's queries take no permit before the statement is matched
$node->safe_psql('postgres', q{
	CREATE FUNCTION lookup_min() RETURNS int LANGUAGE plpgsql STABLE AS
	  'BEGIN RETURN (SELECT min(id) FROM parent); END';
	GRANT EXECUTE ON FUNCTION lookup_min() TO app;});
my ($w1) = verbose_session($node);
my ($w2) = verbose_session($node);
sql($w1, "SELECT bulkhead_acquire('web')");
sql($w2, "SELECT bulkhead_acquire('web')");
reset_stats();
($out, $err) = sql2($app,
	'SELECT count(*) > 0 FROM (SELECT note FROM big WHERE id > lookup_min() ORDER BY note OFFSET 0) s');
is($out, 't', 'a costly statement whose planning runs a query, web full');
is($err, '', 'runs in heavy without waiting for web');
is(counts('heavy'), '1/1/0/0/0', 'in heavy');
is(counts('web'), '0/0/0/0/2', 'web granted nothing meanwhile');
sql($_, "SELECT bulkhead_release('web')") for ($w1, $w2);

# 4. the extended protocol (pgbench): matched once, with its first plan's cost
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_rule (position, min_cost, workload) VALUES (1, 32000, 'huge');});
my $cost_plain = $node->safe_psql('postgres', q{
	SET ROLE app;
	EXPLAIN (FORMAT JSON) SELECT count(*) FROM (SELECT note FROM big ORDER BY note OFFSET 0) s});
my $cost_capped = $node->safe_psql('postgres', q{
	SET ROLE app; SET work_mem = '1MB'; SET max_parallel_workers_per_gather = 0;
	EXPLAIN (FORMAT JSON) SELECT count(*) FROM (SELECT note FROM big ORDER BY note OFFSET 0) s});
my ($plain) = $cost_plain =~ /"Total Cost": ([0-9.]+)/;
my ($capped) = $cost_capped =~ /"Total Cost": ([0-9.]+)/;
cmp_ok($plain, '<', 32000, "the report costs $plain as planned first (under 32000)");
cmp_ok($capped, '>=', 32000, "and $capped under heavy's caps (at least 32000)");
ok(poll_until($node, q{SET ROLE app;
	SELECT workload = 'huge' FROM bulkhead_classify('SELECT count(*) FROM generate_series(1, 10000000)')}),
	'the rule of huge is loaded');
my $script = PostgreSQL::Test::Utils::tempdir . '/report.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"SELECT count(*) FROM (SELECT note FROM big ORDER BY note OFFSET 0) s;\n");
for my $mode ('simple', 'extended', 'prepared')
{
	reset_stats();
	$node->command_ok(
		[ 'pgbench', '-n', '-M', $mode, '-t', '1', '-f', $script,
		  '-U', 'app', '-h', $node->host, '-p', $node->port, 'postgres' ],
		"pgbench -M $mode runs the report");
	is(counts('heavy') . ' ' . counts('huge'), '1/1/0/0/0 0/0/0/0/0',
		"-M $mode: the report ran in heavy, by its first plan's cost, and did not move to huge");
}

# the generic plan built at a prepared statement's sixth execution, only to
# compare its cost, is not matched: a custom plan runs, cheap, in web
$node->safe_psql('postgres', q{
	CREATE TABLE skew AS SELECT g AS id, CASE WHEN g <= 20 THEN 2 ELSE 1 END AS s,
	                            md5(g::text) AS note
	  FROM generate_series(1, 200000) g;
	CREATE INDEX ON skew (s);
	ANALYZE skew;
	GRANT SELECT ON skew TO app;
	UPDATE bulkhead_rule SET min_cost = 10000 WHERE position = 2;
	DELETE FROM bulkhead_rule WHERE position = 1;});
ok(poll_until($node, q{SET ROLE app;
	SELECT workload = 'web' FROM bulkhead_classify('SELECT note FROM skew WHERE s = 2 ORDER BY note')}),
	'the rules are loaded again');
my $skew = PostgreSQL::Test::Utils::tempdir . '/skew.sql';
PostgreSQL::Test::Utils::append_to_file($skew,
	"\\set s 2\nSELECT note FROM skew WHERE s = :s ORDER BY note;\n");
reset_stats();
$node->command_ok(
	[ 'pgbench', '-n', '-M', 'prepared', '-t', '8', '-f', $skew,
	  '-U', 'app', '-h', $node->host, '-p', $node->port, 'postgres' ],
	'pgbench -M prepared: eight executions of a prepared statement');
is(counts('heavy'), '0/0/0/0/0',
	'no execution took heavy (the generic plan compared at the sixth is not matched)');
is(counts('web'), '8/8/0/0/0', 'all eight ran in web');

# 5. a max_hold move, then a statement's move
$node->safe_psql('postgres', q{
	UPDATE bulkhead_workload SET max_hold = '200ms', on_max_hold = 'move',
	       move_to = 'slowlane' WHERE name = 'web';});
ok(poll_until($node, q{SELECT count(*) = 1 FROM bulkhead_workload WHERE max_hold IS NOT NULL}),
	'max_hold is set');
sleep(1.5);    # the worker loads it (its next reload comes within a second)
reset_stats();
($out, $err) = sql2($app, q{
	BEGIN;
	SELECT 1;
	SELECT pg_sleep(0.6);
	SELECT count(*) > 0 FROM (SELECT note FROM big ORDER BY note OFFSET 0) s;
	SELECT workload || ' from ' || moved_from FROM bulkhead_activity WHERE pid = pg_backend_pid();
	COMMIT;});
like($out, qr/heavy from slowlane$/, 'the statement moved the permit from where max_hold had moved it');
is($err, '', 'without an error');
is(counts('slowlane'), '0/0/1/1/0', 'slowlane counts the move in (max_hold) and out (the statement)');
is(counts('web'), '1/0/1/0/0', 'web counts only the max_hold move out');
$node->safe_psql('postgres', q{
	UPDATE bulkhead_workload SET max_hold = NULL, on_max_hold = 'log', move_to = NULL
	 WHERE name = 'web';});

# 6. ALTER DATABASE ... SET TABLESPACE (it commits internally) under caps
my $tsdir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', qq{
	CREATE TABLESPACE ts1 LOCATION '$tsdir';
	CREATE DATABASE movme;});
my ($su) = verbose_session($node);
my $log_offset = -s $node->logfile;
($out, $err) = sql2($su, q{
	SELECT bulkhead_acquire('heavy');
	ALTER DATABASE movme SET TABLESPACE ts1;
	SHOW work_mem;
	SELECT bulkhead_release('heavy');
	SHOW work_mem;});
is($err, '', 'ALTER DATABASE ... SET TABLESPACE runs under a lane\'s caps');
like($out, qr/1MB\n\n4MB$/, 'the caps held after it, and went with the permit');
unlike(slurp_file($node->logfile, $log_offset), qr/GUC nest level/,
	'no GUC nesting level was left behind');

# 7. budgets count a statement's move as a move
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('bud', 4);
	UPDATE bulkhead_workload SET parent = 'bud' WHERE name = 'web';});
ok(poll_until($node, q{SELECT parent = 'bud' FROM bulkhead_stats WHERE workload = 'web'}),
	'web is under budget bud');
reset_stats();
($out, $err) = sql2($app, q{
	BEGIN;
	SELECT 1;
	SELECT count(*) > 0 FROM (SELECT note FROM big ORDER BY note OFFSET 0) s;
	COMMIT;});
is($err, '', 'a statement moves the permit from web, under bud, to heavy');
is(counts('bud'), '1/0/1/0/0', 'bud counts the permit moved out of its subtree');
is(counts('web'), '1/0/1/0/0', 'as web does');
is(counts('heavy'), '0/1/0/1/0', 'heavy counts it moved in');

close_session($_) for ($holder, $app, $w1, $w2, $su);
$node->stop;
done_testing();
