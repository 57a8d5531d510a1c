# frozen_string_literal: true

require "net/http"

# Every route: "ok"; a request with password=wrong is a failed login (401);
# /call, when UPSTREAM is set, answers after calling it (the in-flight tests);
# a request with used=N says in X-Tokens-Used that it used N tokens (the
# metered tests).
class PagesController < ActionController::Base
  skip_forgery_protection # the test posts without a page

  def show
    return render(plain: Net::HTTP.get(URI(ENV.fetch("UPSTREAM")))) if request.path == "/call" && ENV["UPSTREAM"]

    response.set_header("X-Tokens-Used", params[:used].to_s) if params[:used]
    failed = params[:password] == "wrong"
    render plain: failed ? "no" : "ok", status: failed ? 401 : 200
  end
end
