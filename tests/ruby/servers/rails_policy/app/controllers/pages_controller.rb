# frozen_string_literal: true

# Every route: "ok"; a request with password=wrong is a failed login (401).
class PagesController < ActionController::Base
  skip_forgery_protection # the test posts without a page

  def show
    failed = params[:password] == "wrong"
    render plain: failed ? "no" : "ok", status: failed ? 401 : 200
  end
end
