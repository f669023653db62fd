# 600_feedback_underestimate.pl: grant feedback (1.5) raises an
# under-estimate.  The statistics say no row has g = 2 (ANALYZE before they
# were added), so the sort asks its floor; its first run spills within that
# grant; the spill raises the next request, and by its third run it sorts in
# memory and asks at most 1.5x what it used.  bulkhead_statements shows the
# peak, the spill and the request (joined by queryid).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = feedback_node('feedback_under');
$node->safe_psql('postgres', q{
	CREATE TABLE under_t (g int, v text);
	INSERT INTO under_t SELECT 1, md5(i::text) FROM generate_series(1, 10) i;
	ANALYZE under_t;
	INSERT INTO under_t SELECT 2, md5(i::text) FROM generate_series(1, 50000) i;
	GRANT SELECT ON under_t TO PUBLIC;
});
my $q = 'SELECT * FROM under_t WHERE g = 2 ORDER BY v';
my $qid = query_id($node, $q);

is(sort_method(explain_in($node, $q)), 'external', 'run 1: the under-estimate spills within its grant');
my ($peak, $spills, $request, $source) = split /\|/, notes($node, $qid);
is($spills, 1, 'its spill is noted');
cmp_ok($request, '>=', 2 * 65536, 'the spill raises the next request (at least twice its floor)');
explain_in($node, $q);
is(sort_method(explain_in($node, $q)), 'quicksort', 'run 3: it sorts in memory');
($peak, $spills, $request, $source) = split /\|/, notes($node, $qid);
is($source, 'feedback', 'its request comes from feedback');
cmp_ok($request, '<=', 1.5 * $peak, "after three runs it asks at most 1.5x what it used ($request, $peak)");
cmp_ok($request, '>=', $peak, 'and no less than it used');

# bulkhead_statements shows them, joined by (queryid, workload)
run_in($node, $q);
is( $node->safe_psql('postgres',
		"SELECT peak_used > 0 AND spills = 1 AND memory_request > 0 AND memory_source = 'feedback'"
		  . " FROM bulkhead_statements WHERE queryid = $qid AND workload = 'w'"),
	't', 'bulkhead_statements shows the peak, the spill and the request');

$node->stop;
done_testing();
