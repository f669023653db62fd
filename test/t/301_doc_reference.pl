# 301_doc_reference.pl: doc/reference.md lists what bulkhead defines, each
# exactly once, and nothing else.
#
# An entry of the page is a table row whose first cell is a name in
# backticks ("| `max_running` | ..."), under one of its "## " headings.  On a
# fresh cluster with bulkhead preloaded and the extension created, the
# entries of each section must be exactly:
#
#   bulkhead_workload, bulkhead_rule  the table's columns
#                      (information_schema.columns), the type cell the
#                      column's type (format_type)
#   Views and functions  the views (by name) and functions (name(identity
#                      arguments), as pg_get_function_identity_arguments
#                      prints them) that depend on the extension (pg_depend)
#   Settings           the bulkhead.* settings: those of pg_settings, with
#                      the default cell `boot_val` followed by the unit
#                      (or "(empty)" for an empty string) and the context
#                      cell pg_settings' context; and those src/ defines
#                      (DefineCustom*Variable) that pg_settings hides
#   Metrics            the metrics of monitoring/prometheus/bulkhead-queries.yaml
#                      as the exporter names them (<query>_<column> for each
#                      column that is not a LABEL), the type cell its usage
#                      (gauge, counter) and the labels cell its LABEL
#                      columns in backticks ("none" for none)
#   Alerts             the alerts of monitoring/prometheus/bulkhead-alerts.yaml
#   Error codes        unique entries, 53B01 and 53B02 among them
#
# So a column, setting, metric or alert added or removed without the page
# fails here, as does a name listed twice.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$FindBin::RealBin/../..";
my $page = slurp_file("$root/doc/reference.md");

# section heading -> [ [ cells... ], ... ] of its entry rows
my (%rows, $section);
for my $line (split /\n/, $page)
{
	if ($line =~ /^## (.+?)\s*$/)
	{
		$section = $1;
		$rows{$section} //= [];
		next;
	}
	next unless defined $section && $line =~ /^\|\s*`([^`]+)`\s*\|/;
	my @cells = split /\s*\|\s*/, $line;
	shift @cells;    # before the first |
	push @{ $rows{$section} }, \@cells;
}

for my $s ('bulkhead_workload', 'bulkhead_rule', 'Views and functions',
	'Settings', 'Metrics', 'Alerts', 'Error codes')
{
	ok(exists $rows{$s}, "the page has a section '## $s'");
	$rows{$s} //= [];
}

sub name_of { my ($cell) = @_; $cell =~ /^`([^`]+)`/; return $1; }

# the names of a section's entries, each once; name -> row
sub entries
{
	my ($s) = @_;
	my (%seen, @twice);
	for my $r (@{ $rows{$s} })
	{
		my $n = name_of($r->[0]);
		push @twice, $n if $seen{$n};
		$seen{$n} = $r;
	}
	is(join(', ', @twice), '', "$s: no entry twice");
	return \%seen;
}

# the entries are exactly the expected names
sub same_names
{
	my ($s, $have, @want) = @_;
	my %want = map { $_ => 1 } @want;
	my @missing = grep { !$have->{$_} } sort keys %want;
	my @extra = grep { !$want{$_} } sort keys %$have;
	is(join(', ', @missing), '', "$s: every one has an entry");
	is(join(', ', @extra), '', "$s: no entry names something that does not exist");
	return;
}

my $node = PostgreSQL::Test::Cluster->new('reference');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\nbulkhead.database = 'postgres'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION bulkhead');

# ---- the tables --------------------------------------------------------------
for my $table ('bulkhead_workload', 'bulkhead_rule')
{
	my $have = entries($table);
	my %type = map { split /\t/ } split /\n/, $node->safe_psql('postgres', qq{
		SELECT attname || E'\t' || format_type(atttypid, atttypmod) FROM pg_attribute
		 WHERE attrelid = '$table'::regclass AND attnum > 0 AND NOT attisdropped});
	my @cols = split /\n/, $node->safe_psql('postgres', qq{
		SELECT column_name FROM information_schema.columns
		 WHERE table_name = '$table' ORDER BY ordinal_position});
	same_names($table, $have, @cols);
	my @wrong = map { "$_ ($have->{$_}[1], not $type{$_})" }
	  grep { $have->{$_} && $type{$_} && $have->{$_}[1] ne $type{$_} } @cols;
	is(join(', ', @wrong), '', "$table: each column's type");
}

# ---- views and functions ---------------------------------------------------
{
	my $have = entries('Views and functions');
	my @objs = split /\n/, $node->safe_psql('postgres', q{
		SELECT p.proname || '(' || array_to_string(ARRAY(
		         SELECT a FROM unnest(string_to_array(pg_get_function_identity_arguments(p.oid), ', ')) a
		          WHERE a NOT LIKE 'OUT %'), ', ') || ')'
		  FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
		 WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
		   AND d.refclassid = 'pg_extension'::regclass
		   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bulkhead')
		UNION ALL
		SELECT c.relname
		  FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
		 WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND c.relkind = 'v'
		   AND d.refclassid = 'pg_extension'::regclass
		   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bulkhead')});
	ok(@objs > 30, 'the extension has its views and functions');
	same_names('Views and functions', $have, @objs);
}

# ---- settings ----------------------------------------------------------------
{
	my $have = entries('Settings');
	my %shown;
	for (split /\n/, $node->safe_psql('postgres', q{
		SELECT concat_ws(E'\t', name, boot_val, coalesce(unit, ''), context) FROM pg_settings
		 WHERE name LIKE 'bulkhead.%'}))
	{
		my ($name, $boot, $unit, $context) = split /\t/, $_, -1;
		$shown{$name} = { boot => $boot, unit => $unit, context => $context };
	}
	# what src/ defines, pg_settings' hidden ones included
	my %defined;
	for my $f (split /\n/, `find '$root/src' -name '*.c'`)
	{
		my $text = slurp_file($f);
		$defined{$1} = 1 while $text =~ /DefineCustom\w+Variable\(\s*"(bulkhead\.[a-z_]+)"/g;
	}
	ok(keys %defined >= keys %shown && keys %shown > 20, 'the settings are found in src/ and pg_settings');
	my @hidden = grep { !$shown{$_} } sort keys %defined;
	for my $name (@hidden)
	{
		is($node->safe_psql('postgres', "SELECT current_setting('$name', true) IS NOT NULL"),
			't', "hidden setting $name exists");
	}
	same_names('Settings', $have, keys %shown, @hidden);
	my @wrong;
	for my $name (sort keys %shown)
	{
		my $r = $have->{$name} or next;
		my $s = $shown{$name};
		my $want = $s->{boot} eq '' ? '(empty)' : "`$s->{boot}`" . ($s->{unit} ne '' ? " $s->{unit}" : '');
		push @wrong, "$name: default '$r->[1]', not '$want'" if $r->[1] ne $want;
		push @wrong, "$name: context '$r->[2]', not '$s->{context}'" if $r->[2] ne $s->{context};
	}
	is(join("\n", @wrong), '', 'Settings: each default and context as pg_settings has them');
}

# ---- metrics -----------------------------------------------------------------
{
	my $have = entries('Metrics');
	my (%metric, $query, @labels, @values, $col);
	my $flush = sub {
		return unless defined $query;
		my $labels = @labels ? join(', ', map { "`$_`" } @labels) : 'none';
		$metric{"${query}_$_->[0]"} = { type => $_->[1], labels => $labels } for @values;
		(@labels, @values) = ();
	};
	for my $line (split /\n/, slurp_file("$root/monitoring/prometheus/bulkhead-queries.yaml"))
	{
		if ($line =~ /^([a-z_]+):\s*$/)
		{
			$flush->();
			$query = $1;
		}
		elsif ($line =~ /^\s+- ([a-z_0-9]+):\s*$/)
		{
			$col = $1;
		}
		elsif ($line =~ /^\s+usage:\s*"(\w+)"/ && defined $col)
		{
			if ($1 eq 'LABEL') { push @labels, $col; }
			else { push @values, [ $col, lc $1 ]; }
			undef $col;
		}
	}
	$flush->();
	ok(keys %metric > 40, 'the queries file has its metrics');
	same_names('Metrics', $have, keys %metric);
	my @wrong;
	for my $m (sort keys %metric)
	{
		my $r = $have->{$m} or next;
		push @wrong, "$m: type '$r->[1]', not '$metric{$m}{type}'"
		  if $r->[1] ne $metric{$m}{type};
		push @wrong, "$m: labels '$r->[2]', not '$metric{$m}{labels}'"
		  if $r->[2] ne $metric{$m}{labels};
	}
	is(join("\n", @wrong), '', 'Metrics: each type and labels as the queries make them');
}

# ---- alerts ------------------------------------------------------------------
{
	my $have = entries('Alerts');
	my @alerts = slurp_file("$root/monitoring/prometheus/bulkhead-alerts.yaml")
	  =~ /^\s*- alert:\s*(\w+)/mg;
	ok(@alerts > 5, 'the rules file has its alerts');
	same_names('Alerts', $have, @alerts);
}

# ---- error codes -------------------------------------------------------------
{
	my $have = entries('Error codes');
	ok($have->{$_}, "Error codes: $_ has an entry") for qw(53B01 53B02);
	my @bad = grep { !/^[0-9A-Z]{5}$/ } sort keys %$have;
	is(join(', ', @bad), '', 'Error codes: every entry is a SQLSTATE');
}

$node->stop('fast');
done_testing();
