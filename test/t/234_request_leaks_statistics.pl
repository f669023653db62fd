# 234_request_leaks_statistics.pl: a statement's memory request is worked
# out, granted and noted (bulkhead_statements.max_memory_requested) in
# hooks_ExecutorStart before the standard executor start checks the
# user's privileges on its tables.  A hashed SetOp requests the planner's
# estimate of its table (memreq.c: table_estimate(numGroups, width)), so a
# role that may not read a table learns its number of distinct values, which
# pg_stats hides from it: the statement fails with 42501, but its request
# stays in bulkhead_statements, which PUBLIC reads.  1.3 refuses the same
# leak for a lane's cost (hooks.c cost_may_show: "its cost would tell what
# pg_stats hides"); memory.c (bulkhead_memory_start) has no such check.
#
# Correct behaviour asserted: a statement the role may not run requests
# nothing that tells the table's statistics (no max_memory_requested noted
# for it), while one it may run is noted (the control).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('request_leaks', memory_request => 'limit',
	conf => "compute_query_id = on\nbulkhead.track_statements = on\n"
	  . "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_memory)
	VALUES ('spied', 8, 8, '60s', '100MB');
	CREATE ROLE spy LOGIN;
	ALTER ROLE spy SET bulkhead.workload = 'spied';
	CREATE TABLE secret AS SELECT (g % 5000) AS a FROM generate_series(1, 50000) g;
	CREATE TABLE open_t AS SELECT (g % 5000) AS a FROM generate_series(1, 50000) g;
	ANALYZE secret, open_t;
	GRANT SELECT ON open_t TO spy;
});
wait_loaded($node, 'spied', 8);

sub requested
{
	my ($stmt) = @_;
	my $plan = $node->safe_psql('postgres', "EXPLAIN (VERBOSE, COSTS OFF) $stmt");
	my $q = $plan =~ /Query Identifier: (-?\d+)/ ? $1 : 0;
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(max_memory_requested), 0) FROM bulkhead_statements WHERE queryid = $q",
		extra_params => [ '-U', 'spy' ]);
}

my ($ret, $out, $err) = $node->psql('postgres', 'SELECT a FROM open_t EXCEPT SELECT 0',
	extra_params => [ '-U', 'spy' ]);
is($ret, 0, 'control: spy runs a hashed EXCEPT on a table it may read');
ok(requested('SELECT a FROM open_t EXCEPT SELECT 0') > 0, 'control: its request is noted');

($ret, $out, $err) = $node->psql('postgres', 'SELECT a FROM secret EXCEPT SELECT 0',
	extra_params => [ '-U', 'spy' ]);
like($err, qr/permission denied for table secret/, 'spy may not read secret');
is(requested('SELECT a FROM secret EXCEPT SELECT 0'), '0',
	'the denied statement left no request (the estimate of secret\'s distinct values) for spy to read');

done_testing();
