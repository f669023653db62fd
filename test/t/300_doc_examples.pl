# 300_doc_examples.pl: every SQL example of README.md and doc/*.md runs, and
# shows what it prints.
#
# Each page gets a fresh cluster with bulkhead preloaded (bulkhead.database
# = postgres) and nothing else but pg_stat_statements: not even CREATE
# EXTENSION, which the page shows.  Its ```sql blocks run in page order, each
# in a psql session that lives for the whole page, connected to database
# postgres as the bootstrap superuser.  A block passes when it raised exactly
# the errors its page says it raises (none, unless told otherwise) and every
# output table it shows matches what psql printed.  So an example that rots
# (a renamed column, a changed result, a function called with a signature it
# no longer has, a setting that is gone) fails here, naming the page and line.
#
# The rules, for whoever writes the pages:
#
#   * Every fence carries a language.  ```sql blocks run; ```sh, ```conf,
#     ```ini, ```java, ```python, ```promql and ```text are not SQL and do
#     not run.  Any other language, or a fence with none, fails the test.
#     (The Java and Python blocks are checked by test/clients/run.sh.)
#
#   * The test runs exactly what a block shows: there are no hidden steps
#     (a "<!-- doc-test: run" comment fails the test).  Every setup an
#     example needs is a visible block.
#
#   * Output is checked.  Comment lines right after a statement that form a
#     table as psql prints it by default (aligned), each prefixed "-- ", are
#     that statement's output:
#
#       SELECT workload, source FROM bulkhead_classify('SELECT 1');
#       --  workload | source
#       -- ----------+--------
#       --  reports  | rule
#       -- (1 row)
#
#     A table is a header line, then the dashes line (only "-" and "+"),
#     then a line for each row, up to the "(N rows)" footer or the first
#     line that is not a "--" comment (so end a table with a blank line or
#     its footer before a comment of prose).  It belongs to the last
#     statement that ended before it (at a ";" outside quotes, comments,
#     dollar-quoted bodies and parentheses, or at \g or \watch); that
#     statement runs in aligned format, and the test compares the column
#     names, each cell (trimmed: widths and spacing do not count), the rows
#     in order (so ORDER BY, when there are two or more), the number of
#     rows, and the footer if one is written.  A cell written "…" matches
#     any value (a time, a pid, a value over several lines); a last row
#     line of just "…" matches any number of further rows, none included.
#     The rest of the block runs as ever, its output unchecked.  A statement
#     that raises an error prints no table, so a table under it fails (with
#     expect, show the error as a comment: "-- ERROR:  ...").  A "--"
#     comment line with " | " in it that is not part of such a table fails
#     too ("add the dashes line").
#
#   * A block may connect its session anew with psql's \c or \connect (say
#     "\c - alice": the same database, as role alice, who needs LOGIN); the
#     session's later blocks run on that connection (as role alice, with
#     her settings, ALTER ROLE ... SET included), until another \c.  A \c
#     that fails fails the test.  Not in an async block: give it a block of
#     its own.  SET ROLE and RESET ROLE work as ever.
#
#   * A one-line comment on the line just above a ```sql fence says how
#     that block runs (not what it runs), options separated by ";":
#
#       <!-- doc-test: session two; expect 53B01 -->
#       ```sql
#       SELECT bulkhead_acquire('reports');
#       ```
#
#       session NAME   run it in the page's session NAME, opened at its
#                      first use (the default session is "main"): a second
#                      client, which the text names ("in a second psql
#                      session: ...")
#       database NAME  the database a session connects to when it is
#                      opened (default postgres, = bulkhead.database)
#       expect CODE,…  the block must raise exactly these SQLSTATEs, errors
#                      and warnings in order (the example shows a failure)
#       async          the block is sent and the page goes on at once, as
#                      when a reader leaves a session waiting for a permit:
#                      the next step starts when the block has ended or its
#                      backend is queued in bulkhead_activity (for a permit,
#                      or waiting for memory); its errors and tables are
#                      checked when its session is used again, or at the
#                      end of the page
#
#   * psql's \watch runs the query once (as \g), since \watch repeats it
#     until interrupted.
#
#   * After a block that changed bulkhead_workload or bulkhead_rule, the
#     test waits until the background worker has loaded the tables (a
#     sentinel workload made, seen in bulkhead_stats and removed), as a
#     reader's next command, typed a moment later, would find them loaded.
#     A reader who is quicker gets 42704 (workload unknown) for about a
#     second: the page says so.
#
# DOC_TEST_SHOW=1 in the environment shows each block's output and messages
# (as notes), to compare with what the page says they are.
# DOC_TEST_PAGES=REGEX runs only the pages whose path matches.
#
# A "<!-- doc-test" comment that is not one of these, an option that is
# not known, and a step that cannot run (its session died, it never ended
# or queued) fail the test.  Nothing is skipped.  Relative links between
# the pages are checked too: the file exists and so does the #anchor (as
# GitHub makes anchors of headings).
use strict;
use warnings;
use utf8;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use Encode qw(decode encode);
use File::Basename qw(basename dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$FindBin::RealBin/../..";
my @pages = ('README.md', map { "doc/" . basename($_) } sort glob("$root/doc/*.md"));
ok(@pages > 1, 'there are pages under doc/') or BAIL_OUT('no doc/*.md');
@pages = grep { /$ENV{DOC_TEST_PAGES}/ } @pages if $ENV{DOC_TEST_PAGES};

my %not_run = map { $_ => 1 } qw(sh conf ini java python promql text);
my %known_option = map { $_ => 1 } qw(session database expect async);

# psql's meta-commands that send the query buffer
my %sends = map { $_ => 1 } qw(g gx gset gexec gdesc gp watch);

# ---- reading a page ---------------------------------------------------------

# The steps of a page: { line, lang, sql, session, database, expect, async,
# chunks, tail, reconnects }, in page order; problems (strings) for what
# cannot be run.
sub parse_page
{
	my ($page) = @_;
	my @lines = split /\n/, decode('UTF-8', slurp_file("$root/$page")), -1;
	my (@steps, @problems, $pending);
	my $i = 0;
	while ($i < @lines)
	{
		my $line = $lines[$i];
		my $n = $i + 1;
		if ($line =~ /^\s*<!--\s*doc-test:\s*run\b/)
		{
			push @problems,
			  "$page:$n: hidden steps are gone: show the setup in a visible block";
			# read on after its end
			$i++ while $line !~ /-->/ && $i < @lines && $lines[$i] !~ /-->/;
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
				# (not {0,0}: perl 5.36 drops a space of a UTF-8 string then)
				s/^ {1,$indent}// for $indent ? @body : ();
				my $opts = ($pending && $pending->{line} == $n - 1) ? $pending->{opts} : {};
				my $step = { %$opts, line => $n, sql => join("\n", @body) };
				split_block($page, $step, \@problems);
				push @steps, $step;
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

# How psql reads $text, roughly (enough for the pages' SQL): the statements,
# each { begin, end } as offsets in $text (a statement ends at a ";" outside
# quotes, comments, dollar quotes and parentheses, or at a meta-command that
# sends it; a meta-command on its own is one too, with its name as meta);
# and for each line, whether it starts outside a string or comment (top)
# and inside a statement not yet ended (pending).
sub lex_sql
{
	my ($text) = @_;
	my (@stmts, @lines);
	my ($begin, $depth, $line) = (undef, 0, 0);
	$lines[0] = { top => 1, pending => 0 };
	my $inside = sub {    # newlines inside a token: lines that start inside it
		my ($tok) = @_;
		my $nl = ($tok =~ tr/\n//);
		$lines[ ++$line ] = { top => 0, pending => 1 } for 1 .. $nl;
	};
	pos($text) = 0;
	while (pos($text) < length $text)
	{
		my $at = pos($text);
		if ($text =~ /\G\n/gc)
		{
			$lines[ ++$line ] = { top => 1, pending => defined $begin ? 1 : 0 };
		}
		elsif ($text =~ /\G[ \t\r\f]+/gc || $text =~ /\G--[^\n]*/gc)
		{
		}
		elsif ($text =~ m{\G/\*}gc)
		{
			my $nest = 1;
			while ($nest > 0 && pos($text) < length $text)
			{
				if    ($text =~ m{\G/\*}gc) { $nest++ }
				elsif ($text =~ m{\G\*/}gc) { $nest-- }
				else                         { $text =~ m{\G(?:[^/*]+|.)}gcs }
			}
			$inside->(substr($text, $at, pos($text) - $at));
		}
		elsif ((($at == 0 || substr($text, $at - 1, 1) !~ /[\w\$]/)
				&& $text =~ /\G[Ee]'(?:[^'\\]|\\.|'')*'?/gcs)
			|| $text =~ /\G'(?:[^']|'')*'?/gc
			|| $text =~ /\G"(?:[^"]|"")*"?/gc)
		{
			$begin //= $at;
			$inside->(substr($text, $at, pos($text) - $at));
		}
		elsif (($at == 0 || substr($text, $at - 1, 1) !~ /[\w\$]/)
			&& $text =~ /\G(\$(?:[A-Za-z_\x80-\x{10FFFF}][\w\x80-\x{10FFFF}]*)?\$)/gc)
		{
			my $tag = $1;
			my $end = index($text, $tag, pos($text));
			pos($text) = $end < 0 ? length $text : $end + length $tag;
			$begin //= $at;
			$inside->(substr($text, $at, pos($text) - $at));
		}
		elsif ($text =~ /\G\\([A-Za-z]+|\\)?[^\n]*/gc)
		{
			my $name = $1 // '';
			if ($sends{$name} && defined $begin)
			{
				push @stmts, { begin => $begin, end => pos($text) };
				undef $begin;
				$depth = 0;
			}
			elsif (!defined $begin)
			{
				push @stmts, { begin => $at, end => pos($text), meta => $name };
			}
		}
		elsif ($text =~ /\G;/gc)
		{
			if ($depth == 0 && defined $begin)
			{
				push @stmts, { begin => $begin, end => pos($text) };
				undef $begin;
			}
		}
		elsif ($text =~ /\G([()])/gc)
		{
			$begin //= $at;
			$depth += $1 eq '(' ? 1 : ($depth > 0 ? -1 : 0);
		}
		else
		{
			$text =~ /\G(?:[^\s'"\$\\;()\-\/]+|.)/gcs;
			$begin //= $at;
		}
	}
	return (\@stmts, \@lines);
}

my $dashes = qr/^\s*-- (-+(?:\+-+)*)\s*$/;
my $footer = qr/^\s*--\s*(\(\d+ rows?\))\s*$/;

# the cells of a table line as the page writes it, trimmed
sub cells
{
	my ($l) = @_;
	$l =~ s/^\s*--//;
	my @c = map { s/^\s+|\s+$//gr } split /\|/, $l, -1;
	return @c ? @c : ('');    # "--": one empty cell
}

# Cut a sql block into chunks at its output tables: { pre, stmt, table },
# pre the SQL before the statement that printed the table, and a tail: the
# SQL after the last table.  A table: { line (on the page), lines (as the
# page writes them), header (names), rows (lists of cells), more (a last
# row "…"), footer }.
sub split_block
{
	my ($page, $step, $problems) = @_;
	my $text = $step->{sql};
	$text =~ s/\\watch\b[^\n]*/\\g/g;    # run once
	my @lines = split /\n/, $text, -1;
	my @off = (0);
	push @off, $off[-1] + length($_) + 1 for @lines;
	my ($stmts, $state) = lex_sql($text);
	my (@chunks, $from);
	$from = 0;
	my $last_end = 0;    # where the text after the last table starts
	for (my $i = 0; $i < @lines; $i++)
	{
		my $n = $step->{line} + 1 + $i;
		next unless $state->[$i]{top} && $lines[$i] =~ /^\s*--/;
		if ($i + 1 < @lines && $lines[ $i + 1 ] =~ $dashes && $state->[ $i + 1 ]{top}
			&& $lines[$i] !~ $dashes)
		{
			my %t = (line => $n, lines => [ @lines[ $i, $i + 1 ] ], header => [ cells($lines[$i]) ],
				rows => []);
			my $j = $i + 2;
			while ($j < @lines && $lines[$j] =~ /^\s*--(?: |$)/)
			{
				push @{ $t{lines} }, $lines[$j];
				if ($lines[$j] =~ $footer)
				{
					$t{footer} = $1;
					$j++;
					last;
				}
				my @c = cells($lines[$j]);
				if ($t{more})
				{
					push @$problems, "$page:" . ($step->{line} + 1 + $j)
					  . ": a row after the last row \"…\" (end a table with a blank line or its footer)";
				}
				elsif (@c == 1 && $c[0] eq '…')
				{
					$t{more} = 1;
				}
				elsif (@c != @{ $t{header} })
				{
					push @$problems,
					  "$page:" . ($step->{line} + 1 + $j) . ": a row of " . scalar(@c)
					  . " cell(s) under a header of " . scalar(@{ $t{header} })
					  . " (end a table with a blank line or its footer)";
				}
				else
				{
					push @{ $t{rows} }, \@c;
				}
				$j++;
			}
			# the statement that printed it: the last one ended before it
			my ($st) = grep { $_->{end} <= $off[$i] } reverse @$stmts;
			if ($state->[$i]{pending})
			{
				push @$problems, "$page:$n: a table after a statement that is not ended (end it with ;)";
			}
			elsif (!$st || $st->{end} <= $last_end)
			{
				push @$problems, "$page:$n: a table that follows no statement";
			}
			else
			{
				push @chunks, {
					pre => substr($text, $from, $st->{begin} - $from),
					stmt => substr($text, $st->{begin}, $st->{end} - $st->{begin}),
					table => \%t };
			}
			$from = $last_end = $j < @lines ? $off[$j] : length $text;
			$i = $j - 1;
			next;
		}
		push @$problems, "$page:$n: looks like output but is not a psql table: add the dashes line"
		  if $lines[$i] =~ / \| /;
	}
	$step->{chunks} = \@chunks;
	$step->{tail} = substr($text, $from);
	$step->{run} = $text;
	$step->{reconnects} = grep { defined $_->{meta} && $_->{meta} =~ /^(?:c|connect)$/ } @$stmts;
	push @$problems, "$page:$step->{line}: \\c in an async block: give it a block of its own"
	  if $step->{reconnects} && $step->{async};
	return;
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

# ---- output tables ----------------------------------------------------------

# The table psql printed (aligned, with a header) in $out: { header, rows,
# footer, lines }, cut at the columns of its dashes line; a cell that goes
# on over lines (marked "+") is one value with newlines.  Undef if there is
# none.
sub psql_table
{
	my ($out) = @_;
	my @l = split /\n/, $out;
	my ($d) = grep { $l[$_] =~ /^-+(?:\+-+)*$/ } 1 .. $#l;
	return undef unless defined $d;
	my (@col, $p);
	$p = 0;
	for my $w (map { length } split /\+/, $l[$d])
	{
		push @col, [ $p, $w ];
		$p += $w + 1;
	}
	my $cut = sub {    # the cells of a line: [ text, marker ]
		my $line = shift;
		$line .= ' ' x ($p - length $line) if length $line < $p;
		return map {
			[   substr($line, $_->[0] + 1, $_->[1] - 2) =~ s/^\s+|\s+$//gr,
				substr($line, $_->[0] + $_->[1] - 1, 1) ]
		} @col;
	};
	my %t = (header => [ map { $_->[0] } $cut->($l[ $d - 1 ]) ], rows => [],
		lines => [ @l[ $d - 1 .. $#l ] ]);
	my $goes_on;
	for my $k ($d + 1 .. $#l)
	{
		if ($l[$k] =~ /^(\(\d+ rows?\))$/)
		{
			$t{footer} = $1;
			$#{ $t{lines} } = $k - $d + 1;
			last;
		}
		my @c = $cut->($l[$k]);
		if ($goes_on)
		{
			my $row = $t{rows}[-1];
			for my $j (0 .. $#c)
			{
				$row->[$j] .= "\n$c[$j][0]" if $goes_on->[$j] eq '+';
			}
		}
		else
		{
			push @{ $t{rows} }, [ map { $_->[0] } @c ];
		}
		$goes_on = (grep { $_->[1] eq '+' } @c) ? [ map { $_->[1] } @c ] : undef;
	}
	return \%t;
}

# How $got (psql_table) differs from $want (a table of a page): a list of
# sentences, empty if it matches.
sub table_diff
{
	my ($want, $got) = @_;
	return ('psql printed no table') unless $got;
	my @d;
	my $names = sub { '(' . join(', ', @{ $_[0] }) . ')' };
	push @d, "the columns are " . $names->($got->{header}) . ", not " . $names->($want->{header})
	  if join("\0", @{ $want->{header} }) ne join("\0", @{ $got->{header} });
	my ($nw, $ng) = (scalar @{ $want->{rows} }, scalar @{ $got->{rows} });
	for my $r (0 .. ($nw < $ng ? $nw : $ng) - 1)
	{
		my ($w, $g) = ($want->{rows}[$r], $got->{rows}[$r]);
		for my $j (0 .. $#$w)
		{
			next if $w->[$j] eq '…';
			my $gv = $g->[$j] // '(none)';
			my $name = $got->{header}[$j] // $j + 1;
			push @d, "row " . ($r + 1) . ", $name: '$gv', not '$w->[$j]'"
			  if $gv ne $w->[$j];
		}
	}
	my $rows = sub { $_[0] == 1 ? '1 row' : "$_[0] rows" };
	push @d, $rows->($ng) . ", not " . ($want->{more} ? "$nw or more" : $nw)
	  if $ng < $nw || ($ng > $nw && !$want->{more});
	push @d, "the footer is '" . ($got->{footer} // '') . "', not '$want->{footer}'"
	  if defined $want->{footer} && ($got->{footer} // '') ne $want->{footer};
	return @d;
}

# A block as it runs: each table's statement in aligned format with its
# header and footer, between marks (on stdout and on stderr) that cut the
# output into the pieces, then back to BackgroundPsql's own format
# (psql -XAtq: unaligned, tuples only).
my $mark = '@doc-test-mark@';

sub script
{
	my ($step) = @_;
	my $m = "\\echo '$mark'\n\\warn '$mark'\n";
	my $s = '';
	for my $c (@{ $step->{chunks} })
	{
		$s .= "$c->{pre}\n$m\\pset format aligned\n\\pset tuples_only off\n$c->{stmt}\n"
		  . "\\pset format unaligned\n\\pset tuples_only on\n$m";
	}
	return $s . $step->{tail};
}

# ---- running a page ---------------------------------------------------------

# The errors and warnings of a block's stderr, as SQLSTATEs in order, and
# the lines psql wrote that are no server message (an unknown backslash
# command, a session that died, a \c that failed).
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

sub show
{
	my ($s) = @_;
	return encode('UTF-8', $s);
}

# Check what a block printed: its errors, and its tables.
sub check_step
{
	my ($page, $step, $out, $err) = @_;
	($out, $err) = map { decode('UTF-8', $_) } ($out, $err);
	my @out = split /^\Q$mark\E\n?/m, $out, -1;
	my @err = split /^\Q$mark\E\n?/m, $err, -1;
	my $where = "$page:$step->{line}";
	note(show("$where:\n" . join('', @out) . "\n" . join('', @err))) if $ENV{DOC_TEST_SHOW};

	my ($codes, $other) = messages(join '', @err);
	my $want = join(',', @{ $step->{expect} // [] });
	my $ok = is(join(',', @$codes), $want,
		"$where: " . ($want eq '' ? 'runs without an error' : "raises $want"));
	$ok &&= is(scalar(@$other), 0, "$where: psql has nothing else to say");
	diag(show("$where:\n$step->{sql}\n--- stderr:\n" . join('', @err))) unless $ok;

	my $k = 0;
	for my $c (@{ $step->{chunks} })
	{
		$k++;
		my $t = $c->{table};
		my ($o, $e) = ($out[ 2 * $k - 1 ] // '', $err[ 2 * $k - 1 ] // '');
		my @d;
		if ($e =~ /^(?:psql:[^:]*:\d+: )?(?:ERROR|FATAL|PANIC):|^psql:.*\berror:/m)
		{
			@d = ('the statement raised an error, and a statement that errors has no table: '
				  . (split /\n/, $e)[0]);
		}
		else
		{
			@d = table_diff($t, psql_table($o));
		}
		ok(!@d, "$page:$t->{line}: the table shows what the statement prints")
		  or diag(show("$page:$t->{line}: " . join("\n", @d)
			  . "\n--- the statement:\n$c->{stmt}\n--- the page shows:\n"
			  . join("\n", @{ $t->{lines} }) . "\n--- psql printed:\n"
			  . join("\n", map { "-- $_" =~ s/\s+$//r } split /\n/, $o)));
	}
	return;
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
	my $finish = sub {
		my ($ses) = @_;
		my $step = delete $ses->{async} or return;
		my ($out, $err) = finish_async($ses->{s});
		check_step($page, $step, $out, $err);
	};

	for my $step (@$steps)
	{
		my $ses = $open->($step);
		$finish->($ses);
		my $script = encode('UTF-8', script($step));
		if ($step->{async})
		{
			send_async($ses->{s}, $script);
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
			my ($out, $err) = sql2($ses->{s}, $script);
			check_step($page, $step, $out, $err);
		}
		if ($step->{reconnects})
		{
			# the session's backend is a new one (the async poll watches it)
			my ($pid, $err) = sql2($ses->{s}, 'SELECT pg_backend_pid()');
			if (!ok($pid =~ /^\d+$/ && $err eq '', "$page:$step->{line}: the session is connected after its \\c"))
			{
				# psql running a script ends when a \c fails
				diag("$page:$step->{line}: its \\c failed, and psql with it (does the role"
					  . " exist, with LOGIN?  the database?): $pid$err");
				close_session($ses->{s});
				delete $session{ $ses->{name} };
			}
			else
			{
				$ses->{pid} = $pid;
			}
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
	is(show(join("\n", @$problems)), '', "$page: every fence and doc-test comment can be read");
	is(join("\n", check_links($page)), '', "$page: its relative links resolve");
	note("$page: " . scalar(@$steps) . " SQL steps");
	# a page that dies (a session's psql gone mid-step) fails alone: the
	# pages after it still run
	if (@$steps && !eval { run_page($page, $steps); 1 })
	{
		fail("$page: the page ran to its end");
		diag("$page: $@");
	}
}

done_testing();
