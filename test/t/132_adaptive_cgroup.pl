# 132_adaptive_cgroup.pl: the CPU count of the adaptive law follows a
# cgroup CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us)
# where one is set, not only the CPU affinity.  The worker logs the count
# when it starts ("bulkhead: adaptive limits count N CPUs", with the
# affinity and the quota in the DETAIL).
#
# Creating a cgroup needs root (or a delegated subtree), which the tests
# do not have; so the reading is tested on fixture trees: the hidden
# developer setting bulkhead.cgroup_root (PGC_POSTMASTER) makes the worker
# read /proc/self/cgroup, /proc/self/mountinfo and the cgroup files under
# a directory of the test's own.
#
#  1. cgroup v2 only: cpu.max "150000 100000" in the process's cgroup, and
#     "max 100000" in its parent: 1.5 CPUs, counted as 2.
#  2. hybrid (v1 cpu controller, as in a container without a cgroup
#     namespace, where the mount's root is the container's own cgroup; and
#     v2): 0.5 CPUs by v1, 1 by v2's parent cgroup: the smallest, 0.5,
#     counted as 1.
#  3. no quota anywhere ("max", -1): the affinity.
#  4. If BULKHEAD_TEST_CGROUP names a cgroup directory this user may write
#     (a v2 one with cpu.max, or a v1 one with cpu.cfs_quota_us), a real
#     server runs in it with a quota of one CPU and counts 1.  As root:
#       mkdir /sys/fs/cgroup/bulkhead-test   (v1: under /sys/fs/cgroup/cpu)
#       chown -R postgres /sys/fs/cgroup/bulkhead-test
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = bulkhead_node('adaptive_cgroup');

# Write the fixture files %files (path => content) under $root
sub fixture
{
	my ($root, %files) = @_;
	while (my ($path, $content) = each %files)
	{
		my ($dir) = "$root$path" =~ m{^(.*)/[^/]+$};
		make_path($dir);
		open my $fh, '>', "$root$path" or die "$root$path: $!";
		print $fh $content;
		close $fh;
	}
	return;
}

# Restart the node with bulkhead.cgroup_root = $root; return the worker's
# count and the DETAIL of its log line
sub count_under
{
	my ($root) = @_;
	$node->append_conf('postgresql.conf', "bulkhead.cgroup_root = '$root'\n");
	my $offset = -s $node->logfile;
	$node->restart;
	return count_line($offset);
}

# The worker's count and DETAIL logged after $offset, waiting for them
# (bounded: a worker that does not log fails the test in 30 s)
sub count_line
{
	my ($offset) = @_;
	my $deadline = time() + 30;
	my $log;
	while (1)
	{
		$log = slurp_file($node->logfile, $offset);
		last if $log =~ /adaptive limits count \d+ CPUs\n[^\n]*DETAIL:  [^\n]*\n/;
		last if time() > $deadline;
		usleep(100_000);
	}
	my ($count, $detail) = $log =~
	  /LOG:  bulkhead: adaptive limits count (\d+) CPUs\n[^\n]*DETAIL:  ([^\n]*)/;
	return ($count, $detail // '');
}

my ($affinity) = (count_line(0))[1] =~ /^CPU affinity: (\d+) CPUs; cgroup CPU quota: /;
like($affinity // '', qr/^\d+$/, 'the worker logs its CPU count and affinity at start');
$affinity //= 0;

my $base = $node->basedir . '/cgroot';
my $v2_mount = "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

# 1. cgroup v2
fixture(
	"$base/v2",
	'/proc/self/cgroup' => "0::/system.slice/pg.service\n",
	'/proc/self/mountinfo' =>
	  "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n" . $v2_mount,
	'/sys/fs/cgroup/system.slice/pg.service/cpu.max' => "150000 100000\n",
	'/sys/fs/cgroup/system.slice/cpu.max' => "max 100000\n");
my ($count, $detail) = count_under("$base/v2");
is($detail, "CPU affinity: $affinity CPUs; cgroup CPU quota: 1.50 CPUs.",
	'v2: the quota of cpu.max is read (1.5 CPUs)');
is($count, $affinity < 2 ? $affinity : 2, 'v2: 1.5 CPUs count as 2 (or the affinity if fewer)');

# 2. hybrid: v1 cpu controller mounted from the container's own cgroup
fixture(
	"$base/hybrid",
	'/proc/self/cgroup' =>
	  "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/box/inner\n",
	'/proc/self/mountinfo' =>
	  "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
	  . "31 25 0:27 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
	  . "32 25 0:28 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
	  . "33 25 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
	'/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us' => "50000\n",
	'/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us' => "100000\n",
	'/sys/fs/cgroup/memory/cpu.cfs_quota_us' => "10000\n",    # not cpu's
	'/sys/fs/cgroup/unified/box/cpu.max' => "100000 100000\n",
	'/sys/fs/cgroup/unified/box/inner/cpu.max' => "max 100000\n");
($count, $detail) = count_under("$base/hybrid");
is($detail, "CPU affinity: $affinity CPUs; cgroup CPU quota: 0.50 CPUs.",
	'hybrid: the smallest quota (v1, 0.5 CPUs; v2 has 1 on a parent)');
is($count, 1, 'hybrid: 0.5 CPUs count as 1');

# 3. no quota
fixture(
	"$base/none",
	'/proc/self/cgroup' => "3:cpu:/\n0::/\n",
	'/proc/self/mountinfo' =>
	  "31 25 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n" . $v2_mount,
	'/sys/fs/cgroup/cpu/cpu.cfs_quota_us' => "-1\n",
	'/sys/fs/cgroup/cpu/cpu.cfs_period_us' => "100000\n",
	'/sys/fs/cgroup/cpu.max' => "max 100000\n");
($count, $detail) = count_under("$base/none");
is($detail, "CPU affinity: $affinity CPUs; cgroup CPU quota: none.",
	'no quota set: none');
is($count, $affinity, 'no quota: the affinity');

# The count is used: a workload that becomes adaptive starts at twice it
($count, $detail) = count_under("$base/hybrid");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, adaptive)
	VALUES ('w', 64, true)});
ok( poll_until(
		$node,
		"SELECT current_limit = 2 FROM bulkhead_stats WHERE workload = 'w'"),
	'with a quota of 0.5 CPUs, an adaptive workload starts at 2 (twice 1 CPU)');

# 4. A real cgroup, if one is given
SKIP:
{
	my $cg = $ENV{BULKHEAD_TEST_CGROUP};
	skip 'BULKHEAD_TEST_CGROUP not set (a cgroup directory this user may write)', 2
	  unless $cg && -w "$cg/cgroup.procs";
	if (-e "$cg/cpu.max")
	{
		PostgreSQL::Test::Utils::append_to_file("$cg/cpu.max", "100000 100000\n");
	}
	else
	{
		PostgreSQL::Test::Utils::append_to_file("$cg/cpu.cfs_period_us", "100000\n");
		PostgreSQL::Test::Utils::append_to_file("$cg/cpu.cfs_quota_us", "100000\n");
	}
	# this process moves into it, and the server it starts runs there
	PostgreSQL::Test::Utils::append_to_file("$cg/cgroup.procs", "$$\n");
	($count, $detail) = count_under('');
	is($detail, "CPU affinity: $affinity CPUs; cgroup CPU quota: 1.00 CPUs.",
		"a server in cgroup $cg with a quota of one CPU reads it");
	is($count, 1, 'and counts 1 CPU');
}

$node->stop;
done_testing();
