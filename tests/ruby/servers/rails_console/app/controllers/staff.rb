# frozen_string_literal: true

# Who may sign in (name => password) and who of them is staff.
module Staff
  PASSWORDS = { "ops" => "s3cret", "guest" => "pw" }.freeze
  STAFF = ["ops"].freeze

  def self.staff?(name)
    STAFF.include?(name)
  end
end
