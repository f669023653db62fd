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
use BoundTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bound_node('parallel_hash_unwrapped',
	conf => "bulkhead.max_memory = '16MB'\nautovacuum = off\njit = off\n");

my $setup = "SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;"
  . "SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2;"
  . "SET max_parallel_workers = 0; SET work_mem = '256MB'; SET hash_mem_multiplier = 1000;";

sub hash_line
{
	my ($plan) = @_;
	my ($batches, $kb) = $plan =~ /Batches: (\d+).*?Memory Usage: (\d+)kB/;
	return ($batches // -1, $kb // -1);
}

my $join = 'SELECT big.a FROM big JOIN (SELECT * FROM stale WHERE a > 100) s ON s.a = big.a';

# control: the Parallel Hash Join alone under the Gather, its table made in
# the Gather's first call (at the Gather's grant)
my $plan = as_plain($node, $setup . "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $join");
like($plan, qr/Gather.*Parallel Hash Join.*Parallel Hash/s, 'a parallel hash join') or diag($plan);
my ($batches, $kb) = hash_line($plan);
note("control: batches $batches, memory ${kb}kB");
cmp_ok($batches, '>', 1, 'made in the Gather\'s first call, it spills within its grant');

# control: the same Parallel Append with a (not parallel-aware) hash join,
# which keeps its wrapper
$plan = as_plain($node, $setup . "SET enable_parallel_hash = off; EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $join UNION ALL SELECT a FROM big");
like($plan, qr/Gather.*Parallel Append.*Hash Join.*Hash/s, 'a hash join under a Parallel Append')
  or diag($plan);
($batches, $kb) = hash_line($plan);
note("control 2: batches $batches, memory ${kb}kB");
cmp_ok($batches, '>', 1, 'a hash join that is not parallel-aware spills there within its grant');

# the attack: the leader reaches the join after the Gather's first call
$plan = as_plain($node, $setup . "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $join UNION ALL SELECT a FROM big");
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
