# 625_parallel_hash_unwrapped.pl (review of issue 47, 1.5): a Parallel
# Hash Join loses its wrapper in the leader.
#
# At the Gather's first call, ExecInitParallelPlan -> ExecHashJoinInitializeDSM
# calls ExecSetExecProcNode(ExecParallelHashJoin), which overwrites the
# ExecProcNodeReal that nodelimit.c set after ExecutorStart
# (PG-MEMORY.md says so: "parallel HashJoin re-sets it").  So the leader's
# Parallel Hash Join runs at the Gather's settings only while inside the
# Gather's first call; after it, at the session's (work_mem 256MB,
# hash_mem_multiplier 1000 here).  Under a Parallel Append the leader starts
# with the cheapest subplan (a scan) and reaches the join in a later call:
# with no worker launched (max_parallel_workers = 0, a plain role's
# setting) the leader makes the shared table at 256MB x 1000 and an
# under-estimated inner (asks ~64 kB) never spills.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('parallel_hash_unwrapped',
	conf => "bulkhead.max_memory = '16MB'\nautovacuum = off\njit = off\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('w', 8, 8, '60s', '8MB', '1s');
	CREATE ROLE plain LOGIN;
	ALTER ROLE plain SET bulkhead.workload = 'w';
	CREATE TABLE big AS SELECT g AS a, md5(g::text) AS b FROM generate_series(1, 200000) g;
	ANALYZE big;
	GRANT SELECT ON big TO plain;
	CREATE TABLE stale (a int, b text);
	INSERT INTO stale SELECT g, md5(g::text) FROM generate_series(1, 100) g;
	ANALYZE stale;
	INSERT INTO stale SELECT g, md5(g::text) FROM generate_series(101, 100000) g;
	GRANT SELECT ON stale TO plain;
});
wait_loaded($node, 'w', 8);

my $setup = "SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;"
  . "SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2;"
  . "SET max_parallel_workers = 0; SET work_mem = '256MB'; SET hash_mem_multiplier = 1000;";

sub as_plain
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql, extra_params => [ '-U', 'plain' ]);
}

sub hash_line
{
	my ($plan) = @_;
	my ($batches, $kb) = $plan =~ /Batches: (\d+).*?Memory Usage: (\d+)kB/;
	return ($batches // -1, $kb // -1);
}

my $join = 'SELECT big.a FROM big JOIN (SELECT * FROM stale WHERE a > 100) s ON s.a = big.a';

# control: the Parallel Hash Join alone under the Gather, its table made in
# the Gather's first call (at the Gather's grant)
my $plan = as_plain($setup . "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $join");
like($plan, qr/Gather.*Parallel Hash Join.*Parallel Hash/s, 'a parallel hash join') or diag($plan);
my ($batches, $kb) = hash_line($plan);
note("control: batches $batches, memory ${kb}kB");
cmp_ok($batches, '>', 1, 'made in the Gather\'s first call, it spills within its grant');

# control: the same Parallel Append with a (not parallel-aware) hash join,
# which keeps its wrapper
$plan = as_plain($setup . "SET enable_parallel_hash = off; EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $join UNION ALL SELECT a FROM big");
like($plan, qr/Gather.*Parallel Append.*Hash Join.*Hash/s, 'a hash join under a Parallel Append')
  or diag($plan);
($batches, $kb) = hash_line($plan);
note("control 2: batches $batches, memory ${kb}kB");
cmp_ok($batches, '>', 1, 'a hash join that is not parallel-aware spills there within its grant');

# the attack: the leader reaches the join after the Gather's first call
$plan = as_plain($setup . "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $join UNION ALL SELECT a FROM big");
like($plan, qr/Gather.*Parallel Append.*Parallel Hash Join.*Parallel Hash/s,
	'a parallel hash join under a Parallel Append') or diag($plan);
($batches, $kb) = hash_line($plan);
note("attack: batches $batches, memory ${kb}kB");
cmp_ok($batches, '>', 1,
	'the leader\'s parallel hash join made after the Gather\'s first call spills within its grant');
cmp_ok($kb, '<=', 2048, "its table stays within about its grant (${kb}kB)");

is($node->safe_psql('postgres', "SELECT memory_granted FROM bulkhead_stats WHERE workload = 'w'"),
	'0', 'nothing granted at rest');

done_testing();
