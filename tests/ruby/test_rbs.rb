# frozen_string_literal: true

require_relative "test_helper"
require "rbs"
require "ratekeeper/testing"
require "ratekeeper/sidekiq"
require "ratekeeper/web"

# ruby/sig/ratekeeper.rbs against the loaded gem, as stubtest checks the .pyi:
# every method the signature names exists, every public method of the gem is
# in the signature, and each method's positional arity and keyword names
# agree with what Ruby reports for it.
class TestRbs < Minitest::Test
  SIG = File.expand_path("../../ruby/sig/ratekeeper.rbs", __dir__)

  def test_the_signature_matches_the_gem
    problems = []
    each_class(RBS::Parser.parse_signature(File.read(SIG))) do |path, decl|
      klass = path.reduce(Object) { |scope, name| scope.const_get(name, false) }
      declared = { instance: [], singleton: [] }
      decl.members.grep(RBS::AST::Members::Attribute).each do |member|
        declared[member.kind == :singleton ? :singleton : :instance].concat(attribute_methods(member))
      end
      decl.members.grep(RBS::AST::Members::MethodDefinition).each do |member|
        kinds = member.kind == :singleton_instance ? %i[instance singleton] : [member.kind]
        kinds.each do |kind|
          declared[kind] << member.name
          problems.concat(compare(klass, kind, member))
        end
      end
      problems.concat(undeclared(klass, declared))
    end
    assert_empty problems, "ruby/sig/ratekeeper.rbs has drifted:\n  #{problems.join("\n  ")}"
  end

  private

  # Yields [constant path, declaration] of Ratekeeper and every class in it.
  def each_class(decls, path = [], &block)
    decls.each do |decl|
      next unless decl.is_a?(RBS::AST::Declarations::Module) || decl.is_a?(RBS::AST::Declarations::Class)

      here = path + decl.name.to_s.split("::").map(&:to_sym)
      yield here, decl
      each_class(decl.members, here, &block)
    end
  end

  # The methods an attr_reader, attr_writer or attr_accessor declares.
  def attribute_methods(member)
    reader = member.is_a?(RBS::AST::Members::AttrWriter) ? [] : [member.name]
    writer = member.is_a?(RBS::AST::Members::AttrReader) ? [] : [:"#{member.name}="]
    reader + writer
  end

  def runtime_method(klass, kind, name)
    kind == :singleton ? klass.method(name) : klass.instance_method(name)
  rescue NameError
    nil
  end

  def compare(klass, kind, member)
    label = "#{klass}#{kind == :singleton ? "." : "#"}#{member.name}"
    method = runtime_method(klass, kind, member.name)
    return ["#{label} is in the signature but not in the gem"] unless method

    params = method.parameters
    # a native method taking any arguments (magnus' variadic form) says nothing more
    return [] if params == [[:rest]] || params == [[:rest, :args]]

    function = member.types.first.type
    problems = []
    expected = [function.required_positionals.size, function.optional_positionals.size]
    got = [params.count { |type, _| type == :req }, params.count { |type, _| type == :opt }]
    problems << "#{label}: positional (required, optional) #{got} in the gem, #{expected} in the signature" if expected != got
    keywords = (function.required_keywords.keys + function.optional_keywords.keys).map(&:to_s).sort
    runtime_keywords = params.select { |type, _| %i[key keyreq].include?(type) }.map { |_, name| name.to_s }.sort
    if function.rest_keywords
      # **options in both: nothing more to compare
    elsif params.any? { |type, _| type == :keyrest }
      # **options handed to the core: the signature names the core's options, old names too
      known = (Ratekeeper::DEFAULTS.keys + Ratekeeper::RENAMED_OPTIONS.keys).map(&:to_s).sort
      problems << "#{label}: keywords #{keywords} in the signature, the core's options are #{known}" if keywords != known
    elsif keywords != runtime_keywords
      problems << "#{label}: keywords #{runtime_keywords} in the gem, #{keywords} in the signature"
    end
    problems
  end

  # What every object answers, whoever defines it: not part of the gem's surface.
  OBJECT = %i[inspect to_s == === eql? hash].freeze

  def undeclared(klass, declared)
    problems = []
    own = klass.public_instance_methods(false).reject { |name| name.start_with?("_") || OBJECT.include?(name) }
    (own - declared[:instance]).each { |name| problems << "#{klass}##{name} is in the gem but not in the signature" }
    singles = klass.singleton_methods(false).reject { |name| name.start_with?("_") || OBJECT.include?(name) }
    (singles - declared[:singleton]).each { |name| problems << "#{klass}.#{name} is in the gem but not in the signature" }
    problems
  end
end
