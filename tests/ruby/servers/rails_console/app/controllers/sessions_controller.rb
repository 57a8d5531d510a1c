# frozen_string_literal: true

# Sign-in: a form, and a POST that keeps the name in the session.
class SessionsController < ActionController::Base
  def new
    render html: <<~HTML.html_safe
      <form method="post" action="/login">
        <input type="hidden" name="authenticity_token" value="#{form_authenticity_token}">
        <input name="name"> <input name="password" type="password">
        <button type="submit" id="login">Sign in</button>
      </form>
    HTML
  end

  def create
    name = params[:name].to_s
    if Staff::PASSWORDS[name] && ActiveSupport::SecurityUtils.secure_compare(Staff::PASSWORDS[name], params[:password].to_s)
      reset_session
      session["user"] = name
      redirect_to params[:next].presence || "/"
    else
      head :forbidden
    end
  end
end
