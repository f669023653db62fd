# 571_views_bounded.pl: bulkhead_history and bulkhead_statements read in
# bounded memory (issue 47, item 0).  With bulkhead.history_length 1440 and
# bulkhead.max_workloads 10000 (both allowed), 1.4 allocated the whole ring
# on each read (1440 * 10000 rows, over 2 GB: "invalid memory alloc request
# size"), and with bulkhead.max_statements 7000000 the whole table of
# statements (over 1 GB).  Each view now copies a bounded batch of rows
# under its lock at a time.  1500 workloads, more than a batch, each reject
# one call of one statement: an interval has 1500 rows and the statements'
# table 1500 entries, each read once.
#
# Shared memory: the ring takes about 2.5 GB of address space, of which
# only the rows written are touched; the statements' table about 1.3 GB,
# all of it touched when it is made (ShmemInitHash links every entry).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('bounded',
	conf => "bulkhead.history_length = 1440\n"
	  . "bulkhead.max_workloads = 10000\n"
	  . "bulkhead.max_statements = 7000000\n"
	  . "bulkhead.history_interval = 1\n"
	  . "bulkhead.track_statements = on\n"
	  . "compute_query_id = on\n"
	  . "huge_pages = off\n");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	SELECT format('p%s', lpad(g::text, 4, '0')), 0, 0, '0'
	  FROM generate_series(1, 1500) g;
	CREATE ROLE plain LOGIN;
});
wait_loaded($node, 'p1500', 0);

# one statement, rejected once by each workload (all paused, no queue)
is($node->safe_psql('postgres',
		'SELECT count(*) FROM bulkhead_workload WHERE NOT bulkhead_try_acquire(name)'),
	'1500', 'each workload rejects the statement');

is($node->safe_psql('postgres', q{
	SELECT count(*) || ' ' || count(DISTINCT workload) || ' ' || sum(rejected)
	  FROM bulkhead_statements WHERE workload LIKE 'p%'}),
	'1500 1500 1500', 'bulkhead_statements reads its 1500 entries, each once');

# an interval after the rejections: 1500 rows, each workload once
ok(poll_until($node, q{
	SELECT count(*) = 1500 FROM bulkhead_history
	 WHERE rejected_full = 1 AND workload LIKE 'p%'}),
	'bulkhead_history shows each rejection');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT interval_start, count(*) AS n, count(DISTINCT workload) AS d
	                        FROM bulkhead_history GROUP BY 1) x
	 WHERE n <> 1500 OR d <> 1500}),
	'0', 'every interval has its 1500 rows, each workload once');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM bulkhead_history
	 WHERE (boosts IS NULL OR boosts <> 0) AND interval_end < now() - interval '2 s'}),
	'0', 'every row has its boosts joined');

# the views as a plain role reads them, now and after more intervals
my $n = $node->safe_psql('postgres', 'SELECT count(DISTINCT interval_start) FROM bulkhead_history');
ok(poll_until($node,
		"SELECT count(DISTINCT interval_start) >= $n + 2 FROM bulkhead_history"),
	'the ring goes on');
is($node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM bulkhead_history) % 1500 = 0,
	       (SELECT count(*) FROM bulkhead_statements WHERE workload LIKE 'p%')},
		extra_params => [ '-U', 'plain' ]),
	't|1500', 'a plain role reads both views');

done_testing();
