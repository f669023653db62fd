# BoundTest.pm: what the tests of the bound for every role share (590,
# 621, 622, 624, 625).
#
# bound_node(NAME, conf => CONF, memory => '8MB', stale_rows => 100000): a
# preloaded server with CONF appended; a workload 'w' (8 permits, 8 queue
# slots, queue_timeout 60s, max_memory MEMORY, memory_timeout 1s); a plain
# role 'plain' (LOGIN) whose sessions run in w; a table big (200000 rows
# of (g, md5(g)), analyzed) and a table stale (analyzed with 100 rows, then
# filled up to STALE_ROWS: its statistics under-estimate it), both
# readable by plain.  Returns the node once w is loaded.
# as_plain(NODE, SQL): SQL run as plain, its output.
package BoundTest;
use strict;
use warnings;
use Exporter 'import';
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;

our @EXPORT = qw(bound_node as_plain);

sub bound_node
{
	my ($name, %opts) = @_;
	my $memory = $opts{memory} // '8MB';
	my $stale_rows = $opts{stale_rows} // 100000;
	my $node = bulkhead_node($name, conf => $opts{conf});
	$node->safe_psql('postgres', qq{
		INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
		                               max_memory, memory_timeout)
		VALUES ('w', 8, 8, '60s', '$memory', '1s');
		CREATE ROLE plain LOGIN;
		ALTER ROLE plain SET bulkhead.workload = 'w';
		CREATE TABLE big AS SELECT g AS a, md5(g::text) AS b FROM generate_series(1, 200000) g;
		ANALYZE big;
		GRANT SELECT ON big TO plain;
		CREATE TABLE stale (a int, b text);
		INSERT INTO stale SELECT g, md5(g::text) FROM generate_series(1, 100) g;
		ANALYZE stale;
		INSERT INTO stale SELECT g, md5(g::text) FROM generate_series(101, $stale_rows) g;
		GRANT SELECT ON stale TO plain;
	});
	wait_loaded($node, 'w', 8);
	return $node;
}

sub as_plain
{
	my ($node, $sql) = @_;
	return $node->safe_psql('postgres', $sql, extra_params => [ '-U', 'plain' ]);
}

1;
