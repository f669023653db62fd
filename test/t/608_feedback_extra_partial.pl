# 608_feedback_extra_partial.pl: a statement shrunk by its extra alone
# (what feedback asks beyond its nodes: see 607), found by the review of
# that change.  An array_agg over 400000 rows asks its function scan's
# store (28125 kB) and, from feedback, about 11 MB beyond it.
#
# 1. Cut to a 35MB limit by its extra alone, its node keeps its setting, and
#    so does the statement: hash_mem_multiplier stays the session's (2), not
#    1 as for a statement whose settings were lowered.
# 2. With another session holding 5 MB: at 37MB the request is cut to the
#    whole limit (its nodes, and of its extra what fits), at 40MB it is not
#    cut; both wait for their memory_timeout (3 s), and at 40MB it is then
#    granted what is free (about 34.8 MB): its nodes and what of its extra
#    fits, not its nodes alone.  (Before the fix, the extra was dropped
#    whole: a higher limit made it wait longer, and the level counted less
#    than the statement used.)
#
# EXPLAIN (ANALYZE, BULKHEAD) shows the figures: PostgreSQL 18 and later.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($major) = `pg_config --version` =~ /PostgreSQL (\d+)/;
plan skip_all => 'EXPLAIN options of extensions need PostgreSQL 18 or later'
  if !defined $major || $major < 18;

my $node = feedback_node('extra_partial');
my $q = q{SELECT array_length(array_agg(g), 1), current_setting('hash_mem_multiplier') FROM generate_series(1, 400000) g};
my $ex = "EXPLAIN (ANALYZE, BULKHEAD, COSTS OFF, TIMING OFF, SUMMARY OFF) $q";
run_in($node, $q) for 1 .. 3;

sub figures {
	my $out = run_in($node, $ex);
	my %f;
	($f{req}) = $out =~ /Memory Requested: (\d+) kB/;
	($f{granted}) = $out =~ /Memory Granted: (\d+) kB/;
	($f{wait}) = $out =~ /Memory Wait: ([\d.]+) ms/;
	($f{shrunk}) = $out =~ /Memory Shrunk: (\w+)/;
	($f{fs}) = $out =~ /function scan .*Grant: (\d+)kB/;
	return \%f;
}
my $n = 0;
sub set_limit {
	my ($lim) = @_;
	$n++;
	$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_memory = '$lim', memory_timeout = '3s' WHERE name = 'w'");
	poll_until($node, "SELECT max_memory = '$lim' FROM bulkhead_stats WHERE workload = 'w'", 30) or die;
	$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_queued = $n WHERE name = 'w'");
	poll_until($node, "SELECT max_queued = $n FROM bulkhead_stats WHERE workload = 'w'", 30) or die;
}
sub show { my ($t, $f) = @_; diag("$t: " . join(' ', map { "$_=$f->{$_}" } sort keys %$f)); }

# 1. pins
my $f = figures();
show('1GB', $f);
like(run_in($node, $q), qr/\|2$/, 'unshrunk: hash_mem_multiplier 2 in its run');
set_limit('35MB');
$f = figures();
show('35MB alone', $f);
is($f->{fs}, 28125, 'cut at 35MB by its extra alone: its node keeps its grant (setting unchanged)');
like(run_in($node, $q), qr/\|2$/, 'so it runs with hash_mem_multiplier 2 (its settings not lowered)');

# 2. a holder of ~5MB (first run: no feedback, no extra)
my $h = session($node);
sql($h, "BEGIN; SELECT bulkhead_acquire_xact('w'); DECLARE c CURSOR FOR SELECT g::text FROM generate_series(1, 50000) g; FETCH 1 FROM c;");
diag('held: ' . $node->safe_psql('postgres', "SELECT memory_granted FROM bulkhead_stats WHERE workload = 'w'"));
set_limit('37MB');
my $at17 = figures();
show('37MB, holder', $at17);
set_limit('40MB');
diag('held: ' . $node->safe_psql('postgres', "SELECT memory_granted FROM bulkhead_stats WHERE workload = 'w'"));
my $at20 = figures();
show('40MB, holder', $at20);
cmp_ok($at20->{wait}, '<=', $at17->{wait} + 500, 'a higher limit does not make it wait longer');
cmp_ok($at20->{granted} * 1024, '>=', 34 * 1024 * 1024,
	'at its memory_timeout it is granted what is free (about 34.8MB), not its nodes alone');
sql($h, 'COMMIT');
close_session($h);
$node->stop;
done_testing();
