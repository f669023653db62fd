# 300_doc_examples.pl: every SQL example of README.md and doc/*.md runs.
#
# Each page gets a fresh cluster with bulkhead preloaded (bulkhead.database
# = postgres) and nothing else but pg_stat_statements, whose join with
# bulkhead_statements doc/monitoring.md shows (1.4): not even CREATE
# EXTENSION, which the page shows or runs in a hidden step.  Its ```sql blocks run in page order, each
# in one psql session that lives for the whole page (SQLSTATEs shown), and
# a block passes when it raised exactly the errors its page says it raises:
# none, unless told otherwise.  So an example that rots (a renamed column, a
# function called with a signature it no longer has, a setting that is
# gone) fails here, naming the page and line.
#
# The convention, for whoever writes the pages:
#
#   * Every fence carries a language.  ```sql blocks run; ```sh, ```conf,
#     ```ini, ```java, ```python, ```promql and ```text are not SQL and do
#     not run.  Any other language, or a fence with none, fails the test:
#     no SQL example can slip through untested under another name.  (The
#     Java and Python blocks are checked by test/clients/run.sh.)
#
#   * A one-line comment on the line just above a ```sql fence sets how
#     that block runs, options separated by ";":
#
#       <!-- doc-test: session two; expect 53B01 -->
#       ```sql
#       SELECT bulkhead_acquire('reports');
#       ```
#
#       session NAME   run it in the page's session NAME, opened at its
#                      first use (the default session is "main"): a second
#                      client, as the text says ("in another session ...")
#       database NAME  the database a session connects to when it is
#                      opened (default postgres, = bulkhead.database)
#       expect CODE,…  the block must raise exactly these SQLSTATEs, errors
#                      and warnings in order (the example shows a failure)
#       async          the block is sent and the page goes on at once, as
#                      when a reader leaves a session waiting for a permit:
#                      the next step starts when the block has ended or its
#                      backend is queued in bulkhead_activity (for a permit,
#                      or waiting for memory); its errors
#                      are checked when its session is used again, or at the
#                      end of the page
#
#   * A hidden step is a comment that opens with "<!-- doc-test: run",
#     options after it on that line, SQL on the lines below, "-->" on a line
#     of its own.  It runs at its place in the page, as a block does: setup
#     that a reader would already have done (a role, a database, a table
#     the example reads) or a second client that the text only describes.
#
#   * psql's \watch runs the query once (as \g), since \watch repeats it
#     until interrupted.
#
#   * After a step that changed bulkhead_workload or bulkhead_rule, the
#     test waits until the background worker has loaded the tables (a
#     sentinel workload made, seen in bulkhead_stats and removed), as a
#     reader's next command, typed a moment later, would find them loaded.
#
# DOC_TEST_SHOW=1 in the environment shows each block's output and messages
# (as notes), to compare with what the page says they are.
#
# A "<!-- doc-test" comment that is not one of these, an option that is
# not known, and a step that cannot run (its session died, it never ended
# or queued) fail the test.  Nothing is skipped.  Relative links between
# the pages are checked too: the file exists and so does the #anchor (as
# GitHub makes anchors of headings).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use File::Basename qw(basename dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$FindBin::RealBin/../..";
my @pages = ('README.md', map { "doc/" . basename($_) } sort glob("$root/doc/*.md"));
ok(@pages > 1, 'there are pages under doc/') or BAIL_OUT('no doc/*.md');

my %not_run = map { $_ => 1 } qw(sh conf ini java python promql text);
my %known_option = map { $_ => 1 } qw(session database expect async);

# ---- reading a page ---------------------------------------------------------

# The steps of a page: { line, lang, sql, session, database, expect, async,
# hidden }, in page order; problems (strings) for what cannot be run.
sub parse_page
{
	my ($page) = @_;
	my @lines = split /\n/, slurp_file("$root/$page"), -1;
	my (@steps, @problems, $pending);
	my $i = 0;
	while ($i < @lines)
	{
		my $line = $lines[$i];
		my $n = $i + 1;
		if ($line =~ /^\s*<!--\s*doc-test:\s*run\b(.*)$/ && $line !~ /-->/)
		{
			# a hidden step: options on this line, SQL up to a line "-->"
			my $opts = parse_options($1, $page, $n, \@problems);
			my @sql;
			$i++;
			while ($i < @lines && $lines[$i] !~ /^\s*-->\s*$/)
			{
				push @sql, $lines[$i];
				$i++;
			}
			if ($i >= @lines)
			{
				push @problems, "$page:$n: hidden step without a closing '-->'";
				last;
			}
			push @steps, { %$opts, line => $n, sql => join("\n", @sql), hidden => 1 };
			push @problems, "$page:$n: empty hidden step" if join('', @sql) !~ /\S/;
			$i++;
			next;
		}
		if ($line =~ /^\s*<!--\s*doc-test:(.*?)-->\s*$/)
		{
			$pending = { opts => parse_options($1, $page, $n, \@problems), line => $n };
			$i++;
			next;
		}
		if ($line =~ /doc-test/)
		{
			push @problems, "$page:$n: a doc-test comment this test cannot read: $line";
			$i++;
			next;
		}
		if ($line =~ /^(\s*)```\s*(\S*)\s*$/)
		{
			my ($indent, $lang) = (length($1), $2);
			my @body;
			$i++;
			while ($i < @lines && $lines[$i] !~ /^\s*```\s*$/)
			{
				push @body, $lines[$i];
				$i++;
			}
			if ($i >= @lines)
			{
				push @problems, "$page:$n: a fence that is never closed";
				last;
			}
			$i++;
			if ($pending && $pending->{line} != $n - 1)
			{
				push @problems,
				  "$page:$pending->{line}: a doc-test comment not on the line above a fence";
			}
			if ($lang eq 'sql')
			{
				# the fence's indentation (a block in a list) is not the SQL's
				s/^ {0,$indent}// for @body;
				my $opts = ($pending && $pending->{line} == $n - 1) ? $pending->{opts} : {};
				push @steps, { %$opts, line => $n, sql => join("\n", @body) };
			}
			elsif ($pending && $pending->{line} == $n - 1)
			{
				push @problems, "$page:$pending->{line}: a doc-test comment above a $lang block";
			}
			elsif ($lang eq '')
			{
				push @problems, "$page:$n: a fence without a language (sql runs; "
				  . join(', ', sort keys %not_run) . " do not)";
			}
			elsif (!$not_run{$lang})
			{
				push @problems, "$page:$n: a fence of unknown language '$lang'";
			}
			undef $pending;
			next;
		}
		if ($pending && $pending->{line} == $n - 1)
		{
			push @problems, "$page:$pending->{line}: a doc-test comment not on the line above a fence";
			undef $pending;
		}
		$i++;
	}
	return (\@steps, \@problems);
}

# "session two; expect 53B01" -> { session => 'two', expect => ['53B01'] }
sub parse_options
{
	my ($text, $page, $n, $problems) = @_;
	my %o;
	for my $opt (grep { /\S/ } split /;/, $text)
	{
		$opt =~ s/^\s+|\s+$//g;
		my ($name, $arg) = split /\s+/, $opt, 2;
		if (!$known_option{$name})
		{
			push @$problems, "$page:$n: unknown doc-test option '$name'";
		}
		elsif ($name eq 'async')
		{
			$o{async} = 1;
		}
		elsif (!defined $arg || $arg eq '')
		{
			push @$problems, "$page:$n: doc-test option '$name' needs a value";
		}
		elsif ($name eq 'expect')
		{
			my @codes = split /\s*,\s*/, $arg;
			push @$problems, "$page:$n: '$arg' is not a list of SQLSTATEs"
			  if grep { !/^[0-9A-Z]{5}$/ } @codes;
			$o{expect} = \@codes;
		}
		else
		{
			$o{$name} = $arg;
		}
	}
	return \%o;
}

# ---- links between the pages ------------------------------------------------

# GitHub's anchor for a heading: lower case, punctuation dropped but for
# "-" and "_", spaces made "-"; a repeated anchor gets "-1", "-2", ...
sub anchors
{
	my ($file) = @_;
	my (%seen, %anchors);
	my $in_fence = 0;
	for (split /\n/, slurp_file($file))
	{
		$in_fence = !$in_fence if /^\s*```/;
		next if $in_fence || !/^#{1,6}\s+(.*?)\s*$/;
		my $a = lc $1;
		$a =~ s/[^\p{L}\p{N}\s_-]//g;
		$a =~ s/ /-/g;
		my $k = $seen{$a}++;
		$anchors{ $k ? "$a-$k" : $a } = 1;
	}
	return \%anchors;
}

sub check_links
{
	my ($page) = @_;
	my @bad;
	my $dir = dirname("$root/$page");
	my $text = slurp_file("$root/$page");
	$text =~ s/^\s*```.*?^\s*```\s*$//gms;    # not in code blocks
	while ($text =~ /\]\(([^)\s]+)\)/g)
	{
		my $target = $1;
		next if $target =~ m{^[a-z]+:};    # http:, https:, mailto:
		my ($file, $anchor) = split /#/, $target, 2;
		my $path = $file eq '' ? "$root/$page" : "$dir/$file";
		if (!-e $path)
		{
			push @bad, "$target: no such file";
			next;
		}
		next unless defined $anchor && $path =~ /\.md$/;
		push @bad, "$target: no such heading" unless anchors($path)->{$anchor};
	}
	return @bad;
}

# ---- running a page ---------------------------------------------------------

# The errors and warnings of a block's stderr, as SQLSTATEs in order, and
# the lines psql wrote that are no server message (an unknown backslash
# command, a session that died).
sub messages
{
	my ($err) = @_;
	my (@codes, @other);
	for my $l (split /\n/, $err)
	{
		if ($l =~ /^(?:psql:[^:]*:\d+: )?(ERROR|WARNING|FATAL|PANIC):  ([0-9A-Z]{5}): /)
		{
			push @codes, $2;
		}
		elsif ($l =~ /^(?:psql:[^:]*:\d+: )?(?:NOTICE|INFO|LOG|DEBUG\d?):  /)
		{
			next;
		}
		elsif ($l =~ /^psql:|background psql failed|^(?:ERROR|FATAL|PANIC|WARNING):/)
		{
			push @other, $l;
		}
	}
	return (\@codes, \@other);
}

my $nodes = 0;

sub run_page
{
	my ($page, $steps) = @_;
	$nodes++;
	my $node = PostgreSQL::Test::Cluster->new("doc$nodes");
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'bulkhead, pg_stat_statements'\n"
		  . "bulkhead.database = 'postgres'\n"
		  . "log_line_prefix = '%m [%p] %b '\n");
	$node->start;

	my %session;    # name -> { s, pid, async => step still running }
	my $open = sub {
		my ($step) = @_;
		my $name = $step->{session} // 'main';
		return $session{$name} if $session{$name};
		my $s = session($node, $step->{database} // 'postgres');
		sql($s, '\\set VERBOSITY verbose');
		my $pid = sql($s, 'SELECT pg_backend_pid()');
		return $session{$name} = { s => $s, pid => $pid, name => $name };
	};
	my $check = sub {
		my ($step, $err) = @_;
		my ($codes, $other) = messages($err);
		my $want = join(',', @{ $step->{expect} // [] });
		my $where = "$page:$step->{line}" . ($step->{hidden} ? ' (hidden step)' : '');
		my $ok = is(join(',', @$codes), $want,
			"$where: " . ($want eq '' ? 'runs without an error' : "raises $want"));
		$ok &&= is(scalar(@$other), 0, "$where: psql has nothing else to say");
		diag("$where:\n$step->{sql}\n--- stderr:\n$err") unless $ok;
	};
	my $finish = sub {
		my ($ses) = @_;
		my $step = delete $ses->{async} or return;
		my ($out, $err) = finish_async($ses->{s});
		note("$page:$step->{line} (async):\n$out\n$err") if $ENV{DOC_TEST_SHOW};
		$check->($step, $err);
	};

	for my $step (@$steps)
	{
		my $ses = $open->($step);
		$finish->($ses);
		(my $sql = $step->{sql}) =~ s/\\watch\b[^\n]*/\\g/g;
		if ($step->{async})
		{
			send_async($ses->{s}, $sql);
			$ses->{async} = $step;
			# on once the block has ended or queues for a permit
			ok( poll_until(
					$node,
					"SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $ses->{pid} AND state = 'active')"
					  . " OR EXISTS (SELECT FROM bulkhead_activity WHERE pid = $ses->{pid}"
					  . " AND state IN ('queued', 'waiting for memory'))",
					30),
				"$page:$step->{line}: the async block ended or queued");
		}
		else
		{
			my ($out, $err) = sql2($ses->{s}, $sql);
			note("$page:$step->{line}:\n$out\n$err") if $ENV{DOC_TEST_SHOW};
			$check->($step, $err);
		}
		sync_worker($node, $page, $step, [ map { $_->{pid} } values %session ])
		  if $step->{sql} =~ /bulkhead_(?:workload|rule)\b|EXTENSION/i;
	}
	for my $ses (values %session)
	{
		$finish->($ses);
		close_session($ses->{s});
	}
	$node->stop('fast');
	return;
}

# The worker has loaded what is committed: a sentinel workload, made now,
# shows in bulkhead_stats (loaded with the tables in one snapshot, rules
# included), and is gone again.  Not while a session of the page holds a
# lock on the tables (a transaction left open on purpose): the sentinel's
# statement trigger would wait for it.
sub sync_worker
{
	my ($node, $page, $step, $pids) = @_;
	my $schema = $node->safe_psql('postgres',
		"SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'bulkhead'"
	);
	return if $schema eq '';
	my $pidlist = join(',', @$pids) || 'NULL';
	return
	  if $node->safe_psql('postgres',
		"SELECT EXISTS (SELECT FROM pg_locks WHERE pid IN ($pidlist)"
		  . " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND relation IN"
		  . " (SELECT oid FROM pg_class WHERE relname IN ('bulkhead_workload', 'bulkhead_rule')"
		  . "  AND relnamespace = '$schema'::regnamespace))") eq 't';
	my $q = qq{"$schema"};
	$node->safe_psql('postgres',
		"SET lock_timeout = '10s'; INSERT INTO $q.bulkhead_workload (name, max_running) VALUES ('doc_test_sync', 1)");
	my $ok = poll_until($node,
		"SELECT count(*) = 1 FROM $q.bulkhead_stats WHERE workload = 'doc_test_sync'", 30);
	$node->safe_psql('postgres',
		"SET lock_timeout = '10s'; DELETE FROM $q.bulkhead_workload WHERE name = 'doc_test_sync'");
	$ok &&= poll_until($node,
		"SELECT count(*) = 0 FROM $q.bulkhead_stats WHERE workload = 'doc_test_sync'", 30);
	ok($ok, "$page:$step->{line}: the worker loaded the tables");
	return;
}

# ---- every page -------------------------------------------------------------

for my $page (@pages)
{
	my ($steps, $problems) = parse_page($page);
	is(join("\n", @$problems), '', "$page: every fence and doc-test comment can be read");
	is(join("\n", check_links($page)), '', "$page: its relative links resolve");
	note("$page: " . scalar(@$steps) . " SQL steps");
	run_page($page, $steps) if @$steps;
}

done_testing();
