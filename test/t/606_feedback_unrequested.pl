# 606_feedback_unrequested.pl: memory no node's limit bounds (1.5) is
# requested from a statement's second run.  string_agg, jsonb_agg and
# ARRAY(subquery) over a large table request nothing at their first run
# (issue 47: 266 MB and 347 MB used against a request of 0); their use is
# measured (the aggregates' values, the array kept by the executor), and
# their next run requests it: at least what they used, at most 1.5x.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = feedback_node('feedback_unrequested');
$node->safe_psql('postgres', q{
	CREATE TABLE big_t AS SELECT md5(i::text) AS v FROM generate_series(1, 100000) i;
	ANALYZE big_t;
});

for my $q ('SELECT length(string_agg(v, \',\')) FROM big_t',
	'SELECT length(jsonb_agg(v)::text) FROM big_t',
	'SELECT array_length(ARRAY(SELECT v FROM big_t), 1)')
{
	my $id = query_id($node, $q);
	my $asked = "SELECT coalesce(max(max_memory_requested), -1) FROM bulkhead_statements"
	  . " WHERE queryid = $id AND workload = 'w'";
	run_in($node, $q);
	is($node->safe_psql('postgres', $asked), 0, "$q: its first run requests nothing");
	my ($peak, $spills, $request, $source) = split /\|/, notes($node, $id);
	cmp_ok($peak, '>', 2 * 1024 * 1024, "its use is measured ($peak bytes)");
	run_in($node, $q);
	my $second = $node->safe_psql('postgres', $asked);
	cmp_ok($second, '>=', $peak, "its second run requests what it used ($second)");
	cmp_ok($second, '<=', 1.5 * $peak, 'at most 1.5x');
	is($source, 'feedback', 'from feedback');
}

$node->stop;
done_testing();
