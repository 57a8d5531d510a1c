# frozen_string_literal: true

# Every route: "ok".
class PagesController < ActionController::Base
  skip_forgery_protection # the test posts without a page

  def show
    render plain: "ok"
  end
end
