# 604_feedback_damaged_file.pl: grant feedback's save file (1.5) is read
# row by row.  Three statements' notes are saved at a clean shutdown; two
# rows are damaged on disk; at the next start the good row is kept, each
# damaged one is dropped with a LOG line, and the server runs.  A file
# whose header is not this library's is ignored with a LOG line.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = feedback_node('feedback_damaged');
$node->safe_psql('postgres', q{
	CREATE TABLE damaged_t (id int, v text);
	INSERT INTO damaged_t SELECT i, md5(i::text) FROM generate_series(1, 20000) i;
	ANALYZE damaged_t;
});
my @queries = ('SELECT * FROM damaged_t ORDER BY v',
	'SELECT * FROM damaged_t ORDER BY v DESC',
	'SELECT * FROM damaged_t ORDER BY id DESC');
run_in($node, $_) for @queries;
my $count = "SELECT count(*) FROM bulkhead_statement_memory() WHERE workload = 'w' AND queryid IN ("
  . join(', ', map { query_id($node, $_) } @queries) . ')';
is($node->safe_psql('postgres', $count), 3, 'three statements noted');

my $file = $node->data_dir . '/pg_stat/bulkhead_feedback.stat';
$node->stop;
ok(-f $file, 'the notes are saved at the shutdown');

# damage rows 2 and 3: one byte in the middle of each
open(my $fh, '+<:raw', $file) or die "open $file: $!";
read($fh, my $header, 16) == 16 or die 'short header';
my ($magic, $format, $rowsize, $rows) = unpack('L4', $header);
is($rows, 3, 'the file holds three rows');
for my $k (1, 2)
{
	my $at = 16 + $k * $rowsize + int($rowsize / 2);
	seek($fh, $at, 0);
	read($fh, my $byte, 1);
	seek($fh, $at, 0);
	print $fh chr(ord($byte) ^ 0x5a);
}
close($fh);

my $log_at = -s $node->logfile;
$node->start;
wait_loaded($node, 'w', 8);
is($node->safe_psql('postgres', $count), 1, 'the good row is kept');
my $log = slurp_file($node->logfile, $log_at);
my @dropped = $log =~ /dropping damaged row (\d+) of bulkhead feedback file/g;
is(join(',', @dropped), '2,3', 'each damaged row is dropped with a LOG line');
ok(!-f $file, 'the file is removed once read');

# a file of another kind: ignored, logged
$node->stop;
open($fh, '>:raw', $file) or die "open $file: $!";
print $fh 'not a bulkhead feedback file at all';
close($fh);
$log_at = -s $node->logfile;
$node->start;
wait_loaded($node, 'w', 8);
is($node->safe_psql('postgres', $count), 0, 'a foreign file gives no notes');
like(slurp_file($node->logfile, $log_at),
	qr/ignoring bulkhead feedback file .* it is corrupt or from another version/,
	'and is logged');

$node->stop;
done_testing();
