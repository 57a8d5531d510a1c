# frozen_string_literal: true

# Every route: which worker answered.
class PagesController < ActionController::Base
  skip_forgery_protection # the login form is posted by the test, without a page

  def show
    render json: { ok: true, pid: Process.pid }
  end
end
