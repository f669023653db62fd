# FeedbackTest.pm: what the grant feedback tests (600-609) share.
#
# feedback_node(NAME, CONF): a server with query identifiers on, autovacuum
# off (the tests' statistics stay as they made them), no parallel workers,
# work_mem 64MB (a node's limit), bulkhead_statements on and a workload
# 'w' with a max_memory of 1GB (so that grants, and feedback, are active).
# run_in(NODE, QUERY): QUERY run once in w (a transaction's permit),
# under EXPLAIN ANALYZE when it is a SELECT with ORDER BY; returns the
# output.  sort_method(OUTPUT): "quicksort", "external", "top-N", or "".
# query_id(NODE, QUERY): its queryid, as EXPLAIN VERBOSE shows it.
# notes(NODE, QUERYID): "peak_used|spills|memory_request|memory_source" of
# its notes in w ("" without notes).
package FeedbackTest;
use strict;
use warnings;
use Exporter 'import';
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;

our @EXPORT = qw(feedback_node run_in explain_in sort_method query_id notes);

sub feedback_node
{
	my ($name, $conf) = @_;
	my $node = bulkhead_node($name,
		conf => "compute_query_id = on\n"
		  . "autovacuum = off\n"
		  . "work_mem = '64MB'\n"
		  . "max_parallel_workers_per_gather = 0\n"
		  . "bulkhead.track_statements = on\n"
		  . ($conf // ''));
	$node->safe_psql('postgres', q{
		INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_memory)
		VALUES ('w', 8, 8, '30s', '1GB');
	});
	wait_loaded($node, 'w', 8);
	return $node;
}

sub run_in
{
	my ($node, $query, %opts) = @_;
	my $role = $opts{role} ? "SET ROLE $opts{role};" : '';
	return $node->safe_psql('postgres',
		"$role BEGIN; SELECT bulkhead_acquire_xact('w'); $query; COMMIT;");
}

sub explain_in
{
	my ($node, $query) = @_;
	return run_in($node,
		"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) $query");
}

sub sort_method
{
	my ($out) = @_;
	return $out =~ /Sort Method: (quicksort|external|top-N)/ ? $1 : '';
}

sub query_id
{
	my ($node, $query) = @_;
	my $out = $node->safe_psql('postgres', "EXPLAIN (VERBOSE, COSTS OFF) $query");
	return $out =~ /Query Identifier: (-?\d+)/ ? $1 : die "no query identifier";
}

sub notes
{
	my ($node, $queryid) = @_;
	return $node->safe_psql('postgres',
		"SELECT peak_used || '|' || spills || '|' || memory_request || '|' || memory_source"
		  . " FROM bulkhead_statement_memory() WHERE workload = 'w' AND queryid = $queryid");
}

1;
