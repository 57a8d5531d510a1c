# frozen_string_literal: true

# Every other route: "ok".
class PagesController < ActionController::Base
  skip_forgery_protection

  def show
    render plain: "ok"
  end
end
