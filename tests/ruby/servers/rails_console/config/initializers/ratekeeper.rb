# frozen_string_literal: true

# Only staff use the console; their changes are recorded as theirs.
Ratekeeper::Web.configure(auth: ->(env) { Staff.staff?(env["rack.session"]&.[]("user")) },
                          actor: ->(env) { env["rack.session"]["user"] })
