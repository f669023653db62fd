# 590_memory_bound.pl: the bound for every role (issue 47, item 0), and
# requests by use (item 1).
#
# 1.4 defects asserted fixed:
# - a plain role with hash_mem_multiplier = 1000 and work_mem = 64kB ran a
#   HashAggregate that used 85 MB under a workload's max_memory of 8MB: the
#   floor scaled each hash node's 64 kB by the multiplier.  Now every
#   memory node runs with its limit lowered to its grant (hash_mem_multiplier
#   1 with work_mem its grant), whatever the session set.
# - a 1,000-row sort asked for all of work_mem (256MB) and waited behind
#   reports; now it asks what its estimate says, and a report asks what its
#   estimate says, not its limit.
# - an under-estimate (stale statistics) spills within its grant: the node
#   never passes it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use BoundTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bound_node('memory_bound',
	conf => "bulkhead.max_memory = '16MB'\nmax_parallel_workers_per_gather = 0\n"
	  . "autovacuum = off\njit = off\n");

# The HashAggregates' Memory Usage (kB) in an EXPLAIN ANALYZE's output
sub hash_usage
{
	my ($plan) = @_;
	return map { $_ } ($plan =~ /Memory Usage: (\d+)kB/g);
}

# 1. hash_mem_multiplier = 1000: three hash aggregates, one statement
my $three = 'SELECT count(*) FROM (SELECT b, count(*) FROM big GROUP BY b '
  . 'UNION ALL SELECT b, count(*) FROM big GROUP BY b '
  . 'UNION ALL SELECT b, count(*) FROM big GROUP BY b) s';
my $plan = as_plain($node, "SET work_mem = '64kB'; SET hash_mem_multiplier = 1000; SET enable_sort = off;"
	  . "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $three");
my @used = hash_usage($plan);
is(scalar(@used), 3, 'three hash aggregates ran') or diag($plan);
my $sum = 0;
$sum += $_ for @used;
note("their memory (kB): @used");
# the workload's 8MB, a 64 kB floor per node, and the hash tables' own
# overshoot past their limit (a batch's partition buffers, one block)
cmp_ok($sum, '<=', 8 * 1024 + 3 * 64 + 3 * 1024,
	'with hash_mem_multiplier 1000, the three stay within the workload\'s 8MB (1.4: 85 MB one)');
like($plan, qr/Batches: [2-9]|Batches: \d\d/, 'they spilled, within their grants');
is($node->safe_psql('postgres', 'SELECT memory_granted FROM bulkhead_stats WHERE workload = \'w\''),
	'0', 'nothing granted at rest');

# 2. requests by use: a 1,000-row sort asks its estimate, not work_mem
my $small = as_plain($node, "SET work_mem = '256MB';"
	  . "SELECT memory_requested, memory_source FROM bulkhead_classify("
	  . "'SELECT * FROM (SELECT * FROM big LIMIT 1000) s ORDER BY b')");
my ($req, $src) = split /\|/, $small;
cmp_ok($req, '<', 1024 * 1024, "a 1,000-row sort asks under 1 MB at work_mem 256MB ($req)");
is($src, 'estimate', 'from the plan\'s estimates');
# and runs, at once, while memory is free
my $sorted = as_plain($node, "SET work_mem = '256MB';"
	  . "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT * FROM (SELECT * FROM big LIMIT 1000) s ORDER BY b");
like($sorted, qr/Sort Method: quicksort/, 'the small sort runs in memory');

# 3. an under-estimate spills within its grant: ANALYZE saw a from 1 to
# 100, the table now holds up to 100,000; the sort of a > 100 asks its
# floor and runs with it
my $stale = as_plain($node, "SET work_mem = '256MB';"
	  . "SELECT memory_requested FROM bulkhead_classify('SELECT * FROM stale WHERE a > 100 ORDER BY b')");
cmp_ok($stale, '<=', 1024 * 1024, "the stale estimate asks little ($stale)");
$plan = as_plain($node, "SET work_mem = '256MB';"
	  . "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT * FROM stale WHERE a > 100 ORDER BY b");
like($plan, qr/Sort Method: external merge/, 'the under-estimated sort spills (its grant holds it)')
  or diag($plan);
is($node->safe_psql('postgres', 'SELECT memory_granted FROM bulkhead_stats WHERE workload = \'w\''),
	'0', 'nothing granted at rest');

# 4. the session's settings are its own again after each statement, and
# after an error inside a memory node
is(as_plain($node, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;"
	  . "SELECT count(*) FROM (SELECT * FROM big ORDER BY b) s;"
	  . "SELECT current_setting('work_mem') || ' ' || current_setting('hash_mem_multiplier')"),
	"200000\n3MB 7", 'work_mem and hash_mem_multiplier as the session set them after a statement');
my ($ret, $out, $err) = $node->psql('postgres',
	"SET work_mem = '3MB'; SET hash_mem_multiplier = 7;"
	  . "SELECT b, 1 / (a - 150000) FROM big ORDER BY b;",
	extra_params => [ '-U', 'plain' ]);
like($err, qr/division by zero/, 'an error inside a sort');

is(as_plain($node, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;"
	  . "DO \$\$ BEGIN PERFORM count(*) FROM (SELECT b, 1 / (a - 150000) FROM big ORDER BY b) x;"
	  . " EXCEPTION WHEN division_by_zero THEN NULL; END \$\$;"
	  . "SELECT current_setting('work_mem') || ' ' || current_setting('hash_mem_multiplier')"),
	'3MB 7', 'an error caught inside a sort (a savepoint) leaves the settings as they were');

done_testing();
