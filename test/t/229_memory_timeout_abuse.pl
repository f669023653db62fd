# 229_memory_timeout_abuse.pl: what a plain role outside any workload can
# do to everyone else under bulkhead.max_memory.  Found by the 1.4 review
# against a user-settable bulkhead.memory_timeout, with which such a role
# queued at the server's level for an hour and every later statement of
# every workload waited its whole memory_timeout behind it.  The fix is in
# the design: a statement outside any workload never waits for memory (it
# is granted what is free at once, its floor only while others wait), and
# the setting is gone.
#
# server_waiter_blocks_every_workload: plain, in no workload, asks for
# more than is free at the server: it runs at once, shrunk, and counts no
# wait; a statement of workload w, with room in w and at the server, runs
# at once after it.  bulkhead.memory_timeout is no setting.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = bulkhead_node('memory_timeout_abuse', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\nbulkhead.max_memory = '4MB'\n");
$node->safe_psql('postgres', q{
	CREATE ROLE plain LOGIN;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('w', 8, 8, '60s', '4MB', '3s');});
wait_loaded($node, 'w', 8);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';
my $sorted_setting =
  "SELECT max(current_setting('work_mem')) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s";
my $counts = 'SET work_mem = 64; SELECT memory_waits || \'/\' || memory_waiting FROM bulkhead_memory';

# something holds 2MB of the server's 4MB
my $h = session($node);
sql($h, "BEGIN; DECLARE c CURSOR FOR $sorted;");
is($node->safe_psql('postgres', 'SET work_mem = 64; SELECT memory_granted >= 2097152 FROM bulkhead_memory'),
	't', 'the server has 2MB granted');
my ($waits0) = split m{/}, $node->safe_psql('postgres', $counts);

# plain, in no workload, asks for 8MB (cut to the server's 4MB)
my $att = session($node, 'postgres', 'plain');
is(sql($att, 'SELECT workload IS NULL FROM bulkhead_classify()'), 't', 'plain is in no workload');
like(sql($att, "SET bulkhead.memory_timeout = '1h'"), qr/ERROR:.*bulkhead\.memory_timeout/,
	'bulkhead.memory_timeout is no setting');
sql($att, "SET work_mem = '4MB'");
my $t0 = time();
is(sql($att, $sorted_setting), '1MB',
	'server_waiter_blocks_every_workload: plain runs at once with the 2MB free (work_mem 1MB for its two nodes)');
cmp_ok(time() - $t0, '<', 2.5, 'server_waiter_blocks_every_workload: plain did not wait');
is($node->safe_psql('postgres', $counts), "$waits0/0",
	'server_waiter_blocks_every_workload: the server counts no wait, nobody waits');

# a statement of w asks for 2MB: w is empty, the server has 2MB free
my $v = session($node);
sql($v, "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'w'");
$t0 = time();
is(sql($v, $sorted), '10', 'w\'s statement runs');
cmp_ok(time() - $t0, '<', 2.5,
	'server_waiter_blocks_every_workload: w\'s statement, with room in w and at the server, '
	  . 'does not wait its memory_timeout (3s)');
is($node->safe_psql('postgres', "SELECT memory_waits FROM bulkhead_stats WHERE workload = 'w'"),
	'0', 'server_waiter_blocks_every_workload: w counts no wait');

sql($h, 'CLOSE c; COMMIT');
close_session($_) for ($att, $h, $v);

done_testing();
