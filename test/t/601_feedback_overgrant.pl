# 601_feedback_overgrant.pl: grant feedback (1.5) lowers an over-grant.
# The statistics say the table holds 100000 rows; it now holds 2000 (deleted,
# not vacuumed: the planner still counts its pages as full).  The first run
# asks the plan's estimate and uses a small part of it; the next asks at
# most half of it, still sorts in memory, and asks at most 1.5x what it
# used.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = feedback_node('feedback_over');
$node->safe_psql('postgres', q{
	CREATE TABLE over_t (id int, v text);
	INSERT INTO over_t SELECT i, md5(i::text) FROM generate_series(1, 100000) i;
	ANALYZE over_t;
	DELETE FROM over_t WHERE id > 2000;
});
my $q = 'SELECT * FROM over_t ORDER BY v';
my $qid = query_id($node, $q);
my $first = $node->safe_psql('postgres',
	"SELECT memory_requested FROM bulkhead_classify('$q')");
cmp_ok($first, '>', 4 * 1024 * 1024, "the estimate asks for 100000 rows ($first bytes)");

run_in($node, $q);
is($node->safe_psql('postgres',
		"SELECT max_memory_requested FROM bulkhead_statements WHERE queryid = $qid AND workload = 'w'"),
	$first, 'run 1 asked the estimate');
my ($peak, $spills, $request, $source) = split /\|/, notes($node, $qid);
cmp_ok($request, '<=', $first / 2, "the next request is at most half ($request)");
is($source, 'feedback', 'from feedback');

is(sort_method(explain_in($node, $q)), 'quicksort', 'run 2, with less, still sorts in memory');
explain_in($node, $q);
($peak, $spills, $request, $source) = split /\|/, notes($node, $qid);
is($spills, 0, 'no run spilled');
cmp_ok($request, '<=', 1.5 * $peak, "after three runs it asks at most 1.5x what it used ($request, $peak)");

$node->stop;
done_testing();
