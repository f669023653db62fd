# MemCgroup.pm: a memory cgroup for the TAP tests that need a server under
# a hard memory limit (test/t/220_memory_oom.pl).
#
# The tests run as the postgres user, who cannot make a cgroup: root does
# (scripts/test.sh, memcg_make), hands it to postgres and names its
# directory in BULKHEAD_TEST_MEMCG.  Without one the tests skip, and say
# why (memcg_from_env).
#
# cgroup v1 (a hierarchy with the memory controller, e.g.
# /sys/fs/cgroup/memory/bulkhead-oomtest): a user may move its own
# processes into a group whose cgroup.procs it may write.  cgroup v2: a
# process moves only if its user may write the cgroup.procs of the common
# ancestor of where it is and where it goes; scripts/test.sh therefore
# starts the TAP run inside a subtree handed to postgres (leaf "run"), and
# BULKHEAD_TEST_MEMCG is its leaf "oom".
#
# One test file at a time may use the group: its limit and its OOM
# counter are the group's, not a server's (a file that needs it runs
# beside the others, never beside another such file).
#
# A server is born inside (memcg_start): the pg_ctl that starts it runs
# through a shell that first writes its own pid into cgroup.procs, so the
# postmaster and every process it forks belong to the group, and all the
# memory they touch is charged to it.  The postmaster is protected from the
# OOM killer as PostgreSQL's documentation says (runtime.sgml, "Linux
# Memory Overcommit"): oom_score_adj -1000 for the postmaster and 0 for its
# children (PG_OOM_ADJUST_FILE, PG_OOM_ADJUST_VALUE) where the user may
# lower a score (root, CAP_SYS_RESOURCE); otherwise the children are made
# 500 more likely victims than the postmaster (raising a score needs no
# privilege).

package MemCgroup;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Utils;

our @EXPORT = qw(
  memcg_from_env memcg_version memcg_set_limit memcg_limit memcg_oom_kills
  memcg_peak memcg_reset_peak memcg_procs memcg_start
);

sub _read
{
	my ($file) = @_;
	open my $fh, '<', $file or return undef;
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

sub _write
{
	my ($file, $value) = @_;
	open my $fh, '>', $file or return 0;
	my $ok = print $fh "$value\n";
	# (the kernel answers a write on close, for a buffered print)
	$ok = close($fh) && $ok;
	return $ok;
}

# 1 for a cgroup v1 memory group, 2 for a cgroup v2 one
sub memcg_version
{
	my ($dir) = @_;
	return -e "$dir/memory.limit_in_bytes" ? 1 : 2;
}

# The directory of BULKHEAD_TEST_MEMCG if this user can use it: (dir,
# undef); otherwise (undef, the reason).  Tries a move: a child shell
# writes its pid into the group and exits (nothing stays there).
sub memcg_from_env
{
	my $dir = $ENV{BULKHEAD_TEST_MEMCG};
	return (undef,
		    'BULKHEAD_TEST_MEMCG is not set: it names a memory cgroup that this'
		  . ' user may write (scripts/test.sh makes one as root, for the versions'
		  . ' that run on the host; a chroot has no /sys/fs/cgroup)')
	  unless defined $dir && $dir ne '';
	$dir =~ s{/+$}{};
	return (undef, "BULKHEAD_TEST_MEMCG=$dir is not a directory here")
	  unless -d $dir;
	return (undef, "BULKHEAD_TEST_MEMCG=$dir has no memory controller"
		  . ' (neither memory.limit_in_bytes nor memory.max)')
	  unless -e "$dir/memory.limit_in_bytes" || -e "$dir/memory.max";
	my $v = memcg_version($dir);
	my $limit = $v == 1 ? 'memory.limit_in_bytes' : 'memory.max';
	for my $f ('cgroup.procs', $limit)
	{
		return (undef, "$dir/$f is not writable by uid $>")
		  unless -w "$dir/$f";
	}
	return (undef, "$dir: cannot read its OOM kill counter")
	  unless defined memcg_oom_kills($dir);
	if ($v == 1)
	{
		my $ctl = _read("$dir/memory.oom_control") // '';
		return (undef, "$dir: the OOM killer is disabled (memory.oom_control)")
		  if $ctl =~ /^oom_kill_disable 1/m;
	}
	return (undef,
		"$dir: this user cannot move a process into it"
		  . ($v == 2 ? ' (cgroup v2: the TAP run must itself run inside the subtree'
			  . ' handed to this user, as scripts/test.sh does)' : ''))
	  unless system('sh', '-c', 'echo $$ >"$1/cgroup.procs"', 'sh', $dir) == 0;
	return ($dir, undef);
}

# Set a hard limit of $bytes, and no swap (a machine with swap would
# swap instead of killing); dies if the limit does not hold.
sub memcg_set_limit
{
	my ($dir, $bytes) = @_;
	if (memcg_version($dir) == 1)
	{
		# memsw (memory + swap) must stay >= the limit: whichever order
		# works, then both
		my $memsw = -e "$dir/memory.memsw.limit_in_bytes";
		_write("$dir/memory.limit_in_bytes", $bytes);
		_write("$dir/memory.memsw.limit_in_bytes", $bytes) if $memsw;
		_write("$dir/memory.limit_in_bytes", $bytes)
		  or die "cannot write $dir/memory.limit_in_bytes: $!";
		!$memsw || _write("$dir/memory.memsw.limit_in_bytes", $bytes)
		  or die "cannot write $dir/memory.memsw.limit_in_bytes: $!";
	}
	else
	{
		_write("$dir/memory.max", $bytes)
		  or die "cannot write $dir/memory.max: $!";
		_write("$dir/memory.swap.max", 0) if -e "$dir/memory.swap.max";
		# one victim, not the whole group (the postmaster with it)
		_write("$dir/memory.oom.group", 0) if -e "$dir/memory.oom.group";
	}
	my $now = memcg_limit($dir);
	die "the limit of $dir reads $now, not $bytes" unless $now == $bytes;
	return;
}

# The hard limit in bytes
sub memcg_limit
{
	my ($dir) = @_;
	my $f = memcg_version($dir) == 1 ? 'memory.limit_in_bytes' : 'memory.max';
	my $v = _read("$dir/$f") // '';
	chomp $v;
	return $v;
}

# How many processes of the group the OOM killer killed (v1: oom_kill of
# memory.oom_control, from Linux 4.13; v2: oom_kill of memory.events),
# undef if it cannot be read
sub memcg_oom_kills
{
	my ($dir) = @_;
	my $f = memcg_version($dir) == 1 ? 'memory.oom_control' : 'memory.events';
	my $text = _read("$dir/$f") // '';
	return $text =~ /^oom_kill (\d+)$/m ? $1 : undef;
}

# The group's peak usage in bytes (v1 memory.max_usage_in_bytes, v2
# memory.peak from Linux 5.19), undef if unknown; memcg_reset_peak starts
# it again from the current usage where the kernel allows it
sub memcg_peak
{
	my ($dir) = @_;
	my $f = memcg_version($dir) == 1 ? 'memory.max_usage_in_bytes' : 'memory.peak';
	my $v = _read("$dir/$f");
	return undef unless defined $v && $v =~ /^(\d+)/;
	return $1;
}

sub memcg_reset_peak
{
	my ($dir) = @_;
	my $f = memcg_version($dir) == 1 ? 'memory.max_usage_in_bytes' : 'memory.peak';
	return _write("$dir/$f", 0);
}

# The pids in the group
sub memcg_procs
{
	my ($dir) = @_;
	my $text = _read("$dir/cgroup.procs") // '';
	return grep { /^\d+$/ } split /\n/, $text;
}

# Run $code (a sub); every server that it starts (pg_ctl start or
# restart: PostgreSQL::Test::Cluster calls
# PostgreSQL::Test::Utils::system_log('pg_ctl', ..., 'start') in every
# version) is born in the group $dir, its postmaster protected from the
# OOM killer (see above).  Returns what $code returns.
my $join = <<'EOS';
cg=$1
shift
echo $$ >"$cg/cgroup.procs" || { echo "could not join the cgroup $cg" >&2; exit 1; }
if echo -1000 >/proc/self/oom_score_adj 2>/dev/null; then
	v=0
else
	v=$(($(cat /proc/self/oom_score_adj) + 500))
	[ "$v" -le 1000 ] || v=1000
fi
PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj
PG_OOM_ADJUST_VALUE=$v
export PG_OOM_ADJUST_FILE PG_OOM_ADJUST_VALUE
exec "$@"
EOS

sub memcg_start
{
	my ($dir, $code) = @_;
	my $system_log = \&PostgreSQL::Test::Utils::system_log;
	no warnings 'redefine';
	local *PostgreSQL::Test::Utils::system_log = sub {
		my @cmd = @_;
		return $system_log->(@cmd)
		  unless $cmd[0] eq 'pg_ctl' && grep { /^(re)?start$/ } @cmd;
		return $system_log->('sh', '-c', $join, 'memcg-start', $dir, @cmd);
	};
	return $code->();
}

1;
