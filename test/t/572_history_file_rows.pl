# 572_history_file_rows.pl: the rows of bulkhead_history's save file are
# checked one by one when they are read back at a start (issue 47, item 0).
# A damaged file (written here between a stop and a start) holds, in its
# first interval, a good row, a row with a garbage peak (7.9e18 bytes of
# memory granted), one with a NaN wait p99 and one with more running than
# the server has permits; in its second, a good row.  The good rows load,
# each damaged row is dropped with a LOG line naming the file and what was
# wrong, and the rows after a damaged one are read on.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# intervals of a day: the worker adds none while the test runs (but at
# midnight UTC, which the checks allow for)
my $node = bulkhead_node('histfile', conf => "bulkhead.history_interval = 86400\n");
$node->stop;

# the file's layout (historyfile.c, format 2): a header of four uint32
# (magic, format, sizeof(HistoryRow), intervals), then each interval
# (start, end: int64 microseconds since 2000-01-01; nrows: int32, padded to
# 24 bytes) followed by its rows (a name of NAMEDATALEN bytes, ten int64
# counts, the wait and hold p99 in microseconds (double, -1: none),
# peak_running and peak_queued (int32), peak_memory_granted (int64))
my $inf = 9**9**9;
my $nan = $inf - $inf;
sub row
{
	my (%r) = @_;
	my @counts = (5, 5, 1, 0, 0, 0, 0, 0, 0, 0);
	return pack('Z64 q10 d d l l q', $r{name}, @counts,
		$r{wait_p99} // 1000.0, $r{hold_p99} // 2000.0,
		$r{peak_running} // 2, 0, $r{peak_memory} // 1048576);
}
is(length(row(name => 'x')), 176, 'a row is 176 bytes');
my $start = (time() - 946684800 - 3 * 3600) * 1000000;
my $hour = 3600 * 1000000;
my $file = pack('L4', 0x42484831, 2, 176, 2)
  . pack('q q l x4', $start, $start + $hour, 4)
  . row(name => 'good')
  . row(name => 'bad_peak', peak_memory => 7.9e18)
  . row(name => 'bad_p99', wait_p99 => $nan)
  . row(name => 'bad_running', peak_running => 2000000000)
  . pack('q q l x4', $start + $hour, $start + 2 * $hour, 1)
  . row(name => 'later');
my $path = $node->data_dir . '/pg_stat/bulkhead_history.stat';
open(my $fh, '>:raw', $path) or die "could not write $path: $!";
print $fh $file;
close($fh);

my $offset = -s $node->logfile;
$node->start;
is($node->safe_psql('postgres', q{
	SELECT string_agg(workload || ' ' || acquired || ' ' || peak_running || ' '
	                  || peak_memory_granted || ' ' || wait_p99_ms, ', '
	                  ORDER BY interval_start, workload)
	  FROM bulkhead_history WHERE interval_end < now() - interval '30 minutes'}),
	'good 5 2 1048576 1, later 5 2 1048576 1',
	'the good rows load, before and after the damaged ones; the damaged do not');

my $log = slurp_file($node->logfile, $offset);
my $name = qr/ignoring a row of bulkhead history file "pg_stat\/bulkhead_history\.stat"/;
like($log, qr/$name\n.*DETAIL:  Workload "bad_peak".*peak_memory_granted 7900000000000000000 is out of range/,
	'the row with a garbage peak is dropped, and the log says why');
like($log, qr/$name\n.*DETAIL:  Workload "bad_p99".*wait_p99 NaN is not a duration/,
	'the row with a NaN p99 is dropped, and the log says why');
like($log, qr/$name\n.*DETAIL:  Workload "bad_running".*peak_running 2000000000 is out of range/,
	'the row with more running than permits is dropped, and the log says why');
unlike($log, qr/ends early|corrupt/, 'the rest of the file is read');

done_testing();
