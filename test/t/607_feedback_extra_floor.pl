# 607_feedback_extra_floor.pl: what feedback asks beyond the nodes is never
# part of a shrunk statement's floor.
#
# An array_agg over 400000 rows keeps its array outside any memory node
# (the Agg's transition value): from its second run, feedback asks that
# memory too (the request's extra, 1.25x the highest recent value).  When
# the workload's max_memory is then lowered below the request, the
# statement is cut to fit: its extra is dropped first and its one memory
# node (the function scan's store) shrinks, so the workload's memory_granted
# stays within max_memory.  Before, the extra was counted as a part that
# does not shrink, and a statement cut to a 1MB limit held it all beyond the
# limit (11,268,276 bytes granted on 18): the stress tool's memory mode saw
# levels pass their bound by it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = feedback_node('feedback_extra');
my $q = 'SELECT array_length(array_agg(g), 1) FROM generate_series(1, 400000) g';
my $qid = query_id($node, $q);

run_in($node, $q) for 1 .. 3;
my ($peak, $spills, $request, $source) = split /\|/, notes($node, $qid);
is($source, 'feedback', 'after three runs the request comes from feedback');
cmp_ok($request, '>', 2 * 1024 * 1024,
	"its request ($request bytes) is far above the 1MB limit set below");

# the limit lowered below the request: the statement is cut to fit
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_memory = '1MB' WHERE name = 'w'");
ok(poll_until($node, "SELECT max_memory = '1MB' FROM bulkhead_stats WHERE workload = 'w'", 30),
	'the worker loaded the lower limit');
# (the grants take the loaded limit after the slots: one more load settles it)
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_queued = 9 WHERE name = 'w'");
ok(poll_until($node, "SELECT max_queued = 9 FROM bulkhead_stats WHERE workload = 'w'", 30),
	'and a later load');

my $s = session($node);
my $out = sql($s, "BEGIN; SELECT bulkhead_acquire_xact('w');"
	  . " DECLARE c CURSOR FOR $q; FETCH 1 FROM c;");
like($out, qr/^400000$/m, 'the statement runs, holding its grant while the cursor is open');
my ($granted, $shrunk) = split /\|/, $node->safe_psql('postgres',
	"SELECT memory_granted, memory_shrunk FROM bulkhead_stats WHERE workload = 'w'");
cmp_ok($granted, '<=', 1024 * 1024, "its grant is within the 1MB limit ($granted bytes)");
cmp_ok($granted, '>', 0, 'and it holds one');
cmp_ok($shrunk, '>=', 1, 'counted as shrunk');
sql($s, 'COMMIT');
close_session($s);

$node->stop;
done_testing();
